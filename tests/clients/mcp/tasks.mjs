// baton's MCP tasks driven by the official MCP TypeScript client (@modelcontextprotocol/client)
// and its Tasks package (@modelcontextprotocol/ext-tasks): every case of
// tests/server/test_mcp_tasks.py in this one process, which prints one JSON object (case name ->
// what the case saw) for the pytest cases to assert on.
//
// Usage: node tasks.mjs '{"a": URL, "b": URL, "token": T, "pidA": PID}'
//   a, b: the /mcp URLs of two `baton serve` sharing one Redis; pidA: a's process id (the last
//   case kills it with SIGKILL mid-task, then asks b for the task).

import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import {
  createTaskSessionFromClient,
  resultFromTaskOutcome,
  toolDeclarationFromMcpTool,
} from "@modelcontextprotocol/ext-tasks/client";

const config = JSON.parse(process.argv[2]);
const MODERN = "2026-07-28";
const CLIENT_INFO = { name: "baton-tests", version: "1.0.0" };
const CAPABILITIES = { elicitation: {} };
let ids = 0;

/** One JSON-RPC request POSTed to `url` as a 2026-07-28 single exchange (the raw path the Tasks
 * package needs for V2 task traffic): the routing headers the transport requires, then the
 * response read from JSON or from the SSE stream. */
async function rawPost(url, request, signal) {
  const body = { jsonrpc: "2.0", id: `raw-${++ids}`, ...request };
  const headers = {
    "content-type": "application/json",
    accept: "application/json, text/event-stream",
    authorization: `Bearer ${config.token}`,
    "mcp-protocol-version": MODERN,
    "mcp-method": body.method,
  };
  if (body.method === "tools/call") headers["mcp-name"] = body.params.name;
  if (body.method.startsWith("tasks/")) headers["mcp-name"] = body.params.taskId;
  const response = await fetch(url, { method: "POST", headers, body: JSON.stringify(body), signal });
  const text = await response.text();
  let message;
  if ((response.headers.get("content-type") || "").includes("text/event-stream")) {
    for (const block of text.split(/\r?\n\r?\n/)) {
      const data = block.split(/\r?\n/).filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trim()).join("\n");
      if (!data) continue;
      const parsed = JSON.parse(data);
      if (parsed.id === body.id) message = parsed;
    }
  } else {
    message = JSON.parse(text);
  }
  if (message === undefined) throw new Error(`no response to ${body.method} (HTTP ${response.status})`);
  return message.error ? { kind: "error", error: message.error } : { kind: "result", result: message.result };
}

function framed(request) {
  const params = request.params ?? {};
  return {
    ...request,
    params: {
      ...params,
      _meta: {
        ...(params._meta ?? {}),
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
        "io.modelcontextprotocol/clientCapabilities": {
          ...CAPABILITIES,
          extensions: { "io.modelcontextprotocol/tasks": {} },
        },
      },
    },
  };
}

const ANY = { "~standard": { version: 1, vendor: "baton-tests", validate: (value) => ({ value }) } };

/** tasks/get as the client's era sends it, straight to `url` (the task's view from outside). */
async function taskGet(connected, url, taskId) {
  if (connected.era === "modern") return rawPost(url, framed({ method: "tasks/get", params: { taskId } }));
  try {
    return { kind: "result", result: await connected.client.request({ method: "tasks/get", params: { taskId } }, ANY) };
  } catch (error) {
    return { kind: "error", error: { code: error.code ?? null, message: String(error.message ?? error) } };
  }
}

/** A connected client and its task session, of the given era, on `url`; `answer(request,
 * context, connected)` answers the session's questions. */
async function connect(url, era, answer) {
  const connected = {};
  const onInputRequest = (request, context) => answer(request, context, connected);
  const client = new Client(CLIENT_INFO, {
    capabilities: CAPABILITIES,
    ...(era === "v2" ? { versionNegotiation: { mode: { pin: MODERN } } } : {}),
  });
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { authorization: `Bearer ${config.token}` } },
  });
  await client.connect(transport);
  const tools = (await client.listTools()).tools;
  const declarations = new Map(tools.map((tool) => [tool.name, tool]));
  const session = createTaskSessionFromClient(client, {
    endpointId: `${url}#${era}`,
    onInputRequest,
    tools: { currentTool: (name) => (declarations.has(name) ? toolDeclarationFromMcpTool(declarations.get(name)) : undefined) },
    ...(era === "v2"
      ? {
          rawDispatch: (request, options) => rawPost(url, request, options?.signal),
          v2RequestFraming: { protocolVersion: MODERN, clientInfo: CLIENT_INFO, clientCapabilities: CAPABILITIES },
        }
      : {}),
  });
  return Object.assign(connected, { client, session, era: client.getProtocolEra(), tools, url });
}

async function close(connected) {
  await connected.session.close().catch(() => {});
  await connected.client.close().catch(() => {});
}

/** Calls run as a task and follows it to its end, noting every status it went through. */
async function runTask(connected, task, extra = {}) {
  const seen = [];
  const execution = await connected.session.callTool("run", { task }, { task: { preference: "require" }, ...extra });
  const { outcome } = await execution.settle({
    onEvent: (event) => {
      const view = event.type === "task" ? event.task : event.outcome.task;
      if (view) seen.push({ status: view.status, statusMessage: view.statusMessage ?? null, taskId: view.taskId, createdAt: view.createdAt ?? null, lastUpdatedAt: view.lastUpdatedAt ?? null, pollInterval: view.suggestedPollIntervalMs ?? null, retention: view.retentionMs });
    },
  });
  const result = outcome.status === "completed" ? resultFromTaskOutcome(outcome) : null;
  return {
    kind: execution.kind,
    taskId: execution.handle?.taskId ?? null,
    outcome: outcome.status,
    seen,
    structured: result?.structuredContent ?? null,
    isError: result?.isError ?? null,
    content: result ? result.content.map((block) => block.type) : [],
  };
}

/** Answers an approval, having looked at the task while it waits (its status then). */
const approve = (approved) => async (request, context, connected) => {
  const during = context.taskId ? await taskGet(connected, connected.url, context.taskId) : null;
  asked.push({ kind: request.kind, scope: context.scope, delivery: context.delivery, taskId: context.taskId ?? null, inputId: context.inputId ?? null, params: request.params, during });
  return { action: "accept", content: { approved, reason: approved ? "fine by the test" : "not today" } };
};
let asked = [];

async function attempt(name, body) {
  asked = [];
  try {
    results[name] = { ok: true, ...(await body()), asked };
  } catch (error) {
    results[name] = { ok: false, error: String(error?.stack ?? error), asked };
  }
}

const results = {};

for (const era of ["v2", "v1"]) {
  await attempt(`${era}_approved`, async () => {
    const connected = await connect(config.a, era, approve(true));
    try {
      return { era: connected.era, taskSupport: connected.tools.find((t) => t.name === "run")?.execution?.taskSupport ?? null, ...(await runTask(connected, "publish a haiku")) };
    } finally {
      await close(connected);
    }
  });

  await attempt(`${era}_declined`, async () => {
    const connected = await connect(config.a, era, approve(false));
    try {
      return await runTask(connected, "publish a haiku");
    } finally {
      await close(connected);
    }
  });

  await attempt(`${era}_painted`, async () => {
    const connected = await connect(config.a, era, approve(true));
    try {
      return await runTask(connected, "paint a fox and paint a heron");
    } finally {
      await close(connected);
    }
  });

  await attempt(`${era}_cancel`, async () => {
    const cancelOnAsk = async (request, context, connected) => {
      asked.push({ kind: request.kind, taskId: context.taskId ?? null });
      await connected.session.cancelTask(context.taskId);
      return { action: "cancel" };
    };
    const connected = await connect(config.a, era, cancelOnAsk);
    try {
      const run = await runTask(connected, "publish a haiku");
      const after = await taskGet(connected, config.a, run.taskId);
      return { ...run, after };
    } finally {
      await close(connected);
    }
  });
}

await attempt("kill9", async () => {
  // A task waits for its approval on server a; a dies by SIGKILL; server b, on the same Redis,
  // answers tasks/get for it (and for an unknown id, the spec's error).
  let taskId;
  let killed;
  const released = new Promise((resolve) => { killed = resolve; });
  const dieOnAsk = async (request, context) => {
    taskId = context.taskId;
    process.kill(config.pidA, "SIGKILL");
    killed();
    await new Promise(() => {}); // a is gone: this answer will never be sent
  };
  const connected = await connect(config.a, "v2", dieOnAsk);
  const execution = await connected.session.callTool("run", { task: "publish a haiku" }, { task: { preference: "require" } });
  execution.settle().catch(() => {});
  await released;
  const fromB = await rawPost(config.b, framed({ method: "tasks/get", params: { taskId } }));
  const unknown = await rawPost(config.b, framed({ method: "tasks/get", params: { taskId: `${taskId.split("~")[0]}~not-a-task` } }));
  const undeclared = await rawPost(config.b, { ...framed({ method: "tasks/get", params: { taskId } }), params: { taskId, _meta: { "io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientInfo": CLIENT_INFO, "io.modelcontextprotocol/clientCapabilities": {} } } });
  await connected.session.close().catch(() => {});
  await connected.client.close().catch(() => {});
  return { taskId, fromB, unknown, undeclared };
});

process.stdout.write(JSON.stringify(results) + "\n");
process.exit(0);
