"""Stage 3 factory (autodoc.rerank.make_ranker / validate_config / default_timeout):
bad configs are InvalidParams naming the field, good ones build the provider."""

from __future__ import annotations

import pytest
from helpers.tiny_models import build_tiny_cross_encoder

from autodoc.errors import InvalidParams
from autodoc.rerank import Ranker, default_timeout, make_ranker, validate_config
from autodoc.rerank.http import HttpRanker
from autodoc.rerank.onnx import OnnxRanker


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return build_tiny_cross_encoder(tmp_path_factory.mktemp("tiny"))


def _field(config, field="ranker") -> InvalidParams:
    with pytest.raises(InvalidParams) as info:
        make_ranker(config, field) if field != "ranker" else make_ranker(config)
    err = info.value
    assert err.code == -32602
    assert err.to_rpc()["data"]["field"] == err.field
    return err


def test_none_gives_no_ranker():
    assert make_ranker({"provider": "none"}) is None
    assert make_ranker({}) is None
    assert make_ranker({"provider": "none", "window": 20}) is None


@pytest.mark.parametrize(
    "config, field, words",
    [
        ("onnx", "ranker", "must be an object"),
        ({"provider": "torch"}, "ranker.provider", "none, onnx, http"),
        ({"provider": "onnx"}, "ranker.path", "required"),
        ({"provider": "onnx", "path": ""}, "ranker.path", "non-empty"),
        ({"provider": "onnx", "path": "models/ce"}, "ranker.path", "absolute"),
        ({"provider": "onnx", "path": "/nonexistent/autodoc/ce"}, "ranker.path", "no such folder"),
        ({"provider": "none", "path": "/x"}, "ranker.path", "unknown option for provider none"),
        ({"provider": "http"}, "ranker.url", "required"),
        ({"provider": "http", "url": "ftp://host/rerank"}, "ranker.url", "http:// or https://"),
        ({"provider": "http", "url": "http://127.0.0.1:1", "api": "openai"}, "ranker.api", "tei, cohere"),
        (
            {"provider": "http", "url": "http://127.0.0.1:1", "api": "cohere"},
            "ranker.model",
            "required when api is cohere",
        ),
        ({"provider": "http", "url": "http://127.0.0.1:1", "timeout": 0}, "ranker.timeout", "seconds"),
        ({"provider": "http", "url": "http://127.0.0.1:1", "timeout": "5"}, "ranker.timeout", "seconds"),
        ({"provider": "http", "url": "http://127.0.0.1:1", "batch": 0}, "ranker.batch", "integer"),
        ({"provider": "http", "url": "http://127.0.0.1:1", "path": "/x"}, "ranker.path", "unknown option"),
        (
            {"provider": "http", "url": "http://127.0.0.1:1", "api_key_env": "AUTODOC_TEST_UNSET_KEY"},
            "ranker.api_key_env",
            "AUTODOC_TEST_UNSET_KEY is not set",
        ),
    ],
)
def test_bad_config_names_the_field(config, field, words, monkeypatch):
    monkeypatch.delenv("AUTODOC_TEST_UNSET_KEY", raising=False)
    err = _field(config)
    assert err.field == field
    assert words in err.message


@pytest.mark.parametrize(
    "key, value",
    [
        ("max_length", 0),
        ("max_length", 512.0),
        ("batch", "16"),
        ("batch", True),
        ("threads", -1),
        ("timeout", -1),
        ("model", ""),
        ("windw", 40),
    ],
)
def test_bad_onnx_option_names_the_field(tiny, key, value):
    err = _field({"provider": "onnx", "path": str(tiny), key: value})
    assert err.field == f"ranker.{key}"


def test_missing_model_files_are_explained(tmp_path, tiny):
    empty = tmp_path / "empty"
    empty.mkdir()
    err = _field({"provider": "onnx", "path": str(empty)})
    assert err.field == "ranker.path" and "lacks model.onnx and tokenizer.json" in err.message

    only_model = tmp_path / "only-model"
    only_model.mkdir()
    (only_model / "model.onnx").write_bytes((tiny / "model.onnx").read_bytes())
    err = _field({"provider": "onnx", "path": str(only_model)})
    assert "lacks tokenizer.json" in err.message and "model.onnx and" not in err.message

    err = _field({"provider": "onnx", "path": str(tiny / "tokenizer.json")})
    assert err.field == "ranker.path" and "is a file but not an .onnx model" in err.message


def test_model_that_does_not_load_is_invalid_params(tmp_path, tiny):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "model.onnx").write_bytes(b"this is not a protobuf")
    (broken / "tokenizer.json").write_text((tiny / "tokenizer.json").read_text())
    err = _field({"provider": "onnx", "path": str(broken)})
    assert err.field == "ranker.path" and err.message.startswith(f"ranker.path: cannot load the ranker in {broken}")


def test_field_prefix_is_the_callers(tmp_path):
    err = _field({"provider": "onnx", "path": str(tmp_path / "nope")}, field="options.ranker")
    assert err.field == "options.ranker.path"


def test_good_configs_build_providers(tiny, monkeypatch):
    r = make_ranker({"provider": "onnx", "path": str(tiny), "max_length": 128, "batch": 4, "window": 20})
    assert isinstance(r, OnnxRanker) and (r.max_length, r.batch) == (128, 4)
    assert isinstance(r, Ranker)

    monkeypatch.setenv("AUTODOC_TEST_KEY", "sekret")
    h = make_ranker(
        {
            "provider": "http",
            "url": "http://127.0.0.1:9/",
            "api": "cohere",
            "model": "rerank-v3.5",
            "api_key_env": "AUTODOC_TEST_KEY",
            "timeout": 2,
        }
    )
    assert isinstance(h, HttpRanker) and isinstance(h, Ranker)
    assert h.endpoint == "http://127.0.0.1:9/v1/rerank" and h.name == "rerank-v3.5"
    assert "sekret" not in repr(h.describe())
    h.close()
    t = make_ranker({"provider": "http", "url": "http://127.0.0.1:9/custom/rerank"})
    assert t.endpoint == "http://127.0.0.1:9/custom/rerank" and t.name == "tei@127.0.0.1:9"
    assert t.describe()["batch"] == 32 and t.describe()["timeout"] == 30.0
    t.close()


def test_validate_config_fills_defaults_without_loading(tiny):
    cfg = validate_config({"provider": "onnx", "path": str(tiny)})
    assert cfg == {
        "provider": "onnx",
        "path": str(tiny),
        "max_length": 512,
        "batch": 16,
        "threads": 0,
        "model": tiny.name,
    }


def test_default_timeout_formula():
    assert default_timeout(40) == pytest.approx(6.0)
    assert default_timeout(10) == pytest.approx(2.25)
    assert default_timeout(100) == pytest.approx(13.5)
    # A healthy MiniLM-L6 window of 40 takes 2-3 s here (MODELS.md): the default leaves room.
    assert default_timeout(40) > 3 * 1.5
    assert [default_timeout(w) for w in range(10, 101)] == sorted(default_timeout(w) for w in range(10, 101))
    with pytest.raises(ValueError):
        default_timeout(0)
