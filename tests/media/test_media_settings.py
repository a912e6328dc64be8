"""The one media setting (``--media`` / ``BATON_MEDIA`` / ``media`` in TOML) and its companions:
a directory replaces ``media_dir``, a bucket is an S3 store, a bad value is one clear line; the
image settings build the Images API client only when a model endpoint is configured."""

from __future__ import annotations

from pathlib import Path

import pytest

from baton.bus.errors import ConfigError
from baton.media import DirectoryStore
from baton.media.s3 import S3Store
from baton.settings import image_generator, load_settings, media_store
from baton.subagents.images import OpenAIImages


def test_by_default_the_store_is_the_media_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    store = media_store(load_settings())
    assert isinstance(store, DirectoryStore) and store.root == Path("media").absolute()
    monkeypatch.setenv("BATON_MEDIA_DIR", "/srv/pictures")
    store = media_store(load_settings())
    assert isinstance(store, DirectoryStore) and store.root == Path("/srv/pictures")


@pytest.mark.parametrize("value", ["/srv/media", "file:///srv/media", "file://localhost/srv/media"])
def test_a_directory_replaces_media_dir(value: str) -> None:
    settings = load_settings(None, media=value, media_dir=Path("elsewhere"))
    assert settings.media_dir == Path("/srv/media")  # one folder: tools, lead check, /media
    store = media_store(settings)
    assert isinstance(store, DirectoryStore) and store.root == Path("/srv/media")


def test_a_bucket_from_the_environment_with_its_companions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("BATON_MEDIA", "s3://pictures/team/a")
    monkeypatch.setenv("BATON_MEDIA_URL_EXPIRY", "3600")
    monkeypatch.setenv("BATON_MEDIA_BASE_URL", "https://cdn.example.com")
    settings = load_settings()
    assert settings.media_dir == Path("media")  # untouched by a bucket
    store = media_store(settings)
    assert isinstance(store, S3Store)
    assert (store.bucket, store.prefix, store.url_expiry_s) == ("pictures", "team/a", 3600)
    assert store.base_url == "https://cdn.example.com"


def test_the_config_file_key(tmp_path: Path) -> None:
    config = tmp_path / "baton.toml"
    config.write_text('media = "s3://pictures"\nimage_model = "dall-e-3"\n')
    settings = load_settings(config)
    assert settings.media == "s3://pictures" and settings.image_model == "dall-e-3"


@pytest.mark.parametrize(
    ("variable", "value", "said"),
    [
        ("BATON_MEDIA", "gs://bucket", "bad setting BATON_MEDIA: Value error, media 'gs://"),
        ("BATON_MEDIA_BASE_URL", "ftp://x", "bad setting BATON_MEDIA_BASE_URL: Value error, must"),
        ("BATON_MEDIA_URL_EXPIRY", "0", "bad setting BATON_MEDIA_URL_EXPIRY"),
        ("BATON_IMAGE_RESPONSE_FORMAT", "png", "bad setting BATON_IMAGE_RESPONSE_FORMAT"),
    ],
)
def test_a_bad_value_is_one_line_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, said: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert str(caught.value).startswith(said), str(caught.value)
    assert "\n" not in str(caught.value)


def test_the_images_api_is_asked_only_with_a_model_endpoint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert image_generator(load_settings()) is None  # offline: the demo painter
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("BATON_IMAGE_MODEL", "img-1")
    monkeypatch.setenv("BATON_IMAGE_RESPONSE_FORMAT", "url")
    images = image_generator(load_settings())
    assert isinstance(images, OpenAIImages)
    assert (images.model, images.response_format) == ("img-1", "url")
    assert images.base_url == "http://127.0.0.1:9/v1"
    monkeypatch.setenv("BATON_IMAGE_MODEL", "demo")  # a chat-only server: the demo painter
    assert image_generator(load_settings()) is None


def test_a_bucket_without_the_s3_extra_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "boto3" else real(name, *a)
    )
    hint = r"needs the 's3' extra .*pip install 'baton-orchestrator\[s3\]'"
    with pytest.raises(ConfigError, match=hint):
        media_store(load_settings(None, media="s3://pictures"))
