# baton: one image for every role (`baton worker`, `baton run`, `baton serve`).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    BATON_MEDIA_DIR=/app/media

WORKDIR /app

# The extras to install, comma-separated: `docker build --build-arg EXTRAS=server,s3,otel,mcp,a2a .`
# for the S3 media store, OTLP export, MCP tools and A2A (README.md, docs/).
ARG EXTRAS=server

# Dependencies first, from pyproject.toml alone: this layer is rebuilt only when pyproject.toml
# changes, so a code change does not reinstall them.
COPY pyproject.toml ./
RUN python -c "import os, tomllib; p = tomllib.load(open('pyproject.toml', 'rb'))['project']; \
extras = [e.strip() for e in os.environ['EXTRAS'].split(',') if e.strip()]; \
print('\n'.join(p['dependencies'] + [d for e in extras for d in p['optional-dependencies'][e]]))" \
    > /tmp/deps.txt \
    && pip install -r /tmp/deps.txt && rm /tmp/deps.txt \
    && useradd --create-home --uid 10001 baton && mkdir -p /app/media && chown baton /app/media

# Then the source: a code change reinstalls baton alone (--no-deps: its dependencies are above).
COPY README.md ./
COPY bus ./bus
COPY orchestrator ./orchestrator
COPY subagents ./subagents
RUN pip install --no-deps ".[$EXTRAS]"

USER baton

# Exec form: the process gets SIGTERM itself, so `baton worker` drains on `docker compose stop`.
ENTRYPOINT ["baton"]
CMD ["worker", "--bus", "redis://redis:6379/0"]
