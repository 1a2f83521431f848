"""What a model takes: family defaults, declared capabilities, and the one parameter a 400 refuses."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from triforge.core.capabilities import (
    apply_learned,
    capabilities,
    read_refusal,
    shape_body,
)
from triforge.core.config import ModelConfig, load_settings
from triforge.core.errors import ConfigError
from triforge.testing.strict_families import strict_refusal

BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 64, "temperature": 0.0,
        "stop": ["<tool_response"]}


@pytest.mark.parametrize("model, base_url, api_type, family", [
    ("gpt-5", "https://api.openai.com/v1", "openai", True),
    ("gpt-5-mini-2025-08-07", "https://api.openai.com/v1", "openai", True),
    ("o3-mini", "https://api.openai.com/v1", "openai", True),
    ("o4-mini", "https://myres.openai.azure.com", "azure", True),
    ("o1", "https://myres.cognitiveservices.azure.com", "openai", True),
    ("gpt-5-chat-latest", "https://api.openai.com/v1", "openai", False),  # the chat model takes temperature
    ("gpt-4o", "https://api.openai.com/v1", "openai", False),
    ("gpt-5", "http://localhost:8000/v1", "openai", False),  # another server: learned, not guessed
    ("omni-7b", "https://api.openai.com/v1", "openai", False),
])
def test_family_defaults_apply_only_to_documented_models_on_openai_or_azure(model, base_url, api_type, family):
    extra = {"api_version": "2024-10-21"} if api_type == "azure" else {}
    caps = capabilities(ModelConfig(model=model, base_url=base_url, api_type=api_type, **extra))
    assert (caps.family == "openai-reasoning") is family
    assert (caps.token_limit_param, caps.supports_temperature, caps.supports_stop, caps.reasoning) == (
        ("max_completion_tokens", False, False, True) if family else ("max_tokens", True, True, False))


def test_a_gpt5_alias_needs_only_name_url_and_key_and_sends_nothing_refused():
    caps = capabilities(ModelConfig(model="gpt-5", base_url="https://api.openai.com/v1", api_key_env="OPENAI_API_KEY"))
    sent = shape_body(BODY, caps)
    assert strict_refusal(frozenset({"openai-reasoning"}), sent) is None
    assert sent["max_completion_tokens"] == 64 and "max_tokens" not in sent


def test_declared_capabilities_win_over_the_family_and_add_reasoning_effort():
    cfg = ModelConfig(model="o3", base_url="https://api.openai.com/v1", supports_stop=True, reasoning_effort="high")
    sent = shape_body(BODY, capabilities(cfg))
    assert sent["stop"] == ["<tool_response"] and sent["reasoning_effort"] == "high" and "temperature" not in sent
    plain = shape_body(BODY, capabilities(ModelConfig(model="x", base_url="http://h/v1", token_limit_param="max_completion_tokens")))
    assert plain["max_completion_tokens"] == 64 and plain["temperature"] == 0.0


def test_the_toml_fields_load_and_azure_without_a_version_is_a_config_error(tmp_path):
    f = tmp_path / "triforge.toml"
    f.write_text('[models.g]\nmodel = "gpt-5"\nbase_url = "https://api.openai.com/v1"\nreasoning_effort = "low"\n'
                 'price_cached_in_per_mtok = 0.125\nsend_reasoning_back = true\n')
    cfg = load_settings(files=[f]).models["g"]
    assert (cfg.reasoning_effort, cfg.price_cached_in_per_mtok, cfg.send_reasoning_back) == ("low", 0.125, True)
    f.write_text('[models.a]\nmodel = "gpt-5"\nbase_url = "https://r.openai.azure.com"\napi_type = "azure"\n')
    with pytest.raises(ConfigError, match="api_version"):
        load_settings(files=[f])


def test_cached_input_is_priced_apart_and_reasoning_is_part_of_output():
    cfg = ModelConfig(model="m", price_in_per_mtok=1.25, price_out_per_mtok=10.0, price_cached_in_per_mtok=0.125)
    assert cfg.cost_usd(1_000_000, 0, 400_000) == pytest.approx(0.6 * 1.25 + 0.4 * 0.125)
    assert cfg.cost_usd(0, 1_000_000) == pytest.approx(10.0)
    assert ModelConfig(model="m", price_in_per_mtok=2.0).cost_usd(1_000_000, 0, 500_000) == pytest.approx(2.0)


def _err(**body):
    return SimpleNamespace(body=body, message=body.get("message", ""))


# Each quoted body from issue 38 (as the fake server sends it) and other providers' 400s naming a parameter.
NEW_LIMIT = {k: v for k, v in BODY.items() if k != "max_tokens"} | {"max_completion_tokens": 64}


@pytest.mark.parametrize("body, sent, rule", [
    (strict_refusal(frozenset({"openai-reasoning"}), BODY)["error"], BODY,
     ("max_tokens", "rename:max_completion_tokens")),
    (strict_refusal(frozenset({"openai-reasoning"}), {"temperature": 0.8})["error"], BODY, ("temperature", "drop")),
    (strict_refusal(frozenset({"openai-reasoning"}), {"stop": ["x"]})["error"], BODY, ("stop", "drop")),
    ({"message": 'Invalid JSON payload received. Unknown name "reasoning_effort": Cannot find field.',
      "code": 400}, {**BODY, "reasoning_effort": "low"}, ("reasoning_effort", "drop")),
    ({"message": "stop: Extra inputs are not permitted", "type": "invalid_request_error"}, BODY, ("stop", "drop")),
    ({"message": "max_completion_tokens is not supported by this server"}, NEW_LIMIT,
     ("max_completion_tokens", "rename:max_tokens")),
    ({"message": "Unrecognized request argument supplied: max_tokens"}, BODY, ("max_tokens", "drop")),
    ({"message": "The reasoning_content field is not supported in input messages", "param": None},
     {**BODY, "messages": [{"role": "assistant", "content": "", "reasoning_content": "t"}]},
     ("reasoning_content", "drop")),
])
def test_a_refusal_names_the_one_parameter_and_what_to_do(body, sent, rule):
    assert read_refusal(_err(**body), sent, {}) == rule


@pytest.mark.parametrize("body", [
    {"message": "This model's maximum context length is 8192 tokens. However, you requested 9000 tokens "
                "(8936 in the messages, 64 in the completion). Please reduce the length of the messages or "
                "completion.", "param": "messages", "code": "context_length_exceeded"},
    {"message": "Invalid schema for function 'submit': 'answer' is not valid under any of the given schemas.",
     "param": "tools[0].function.parameters", "code": "invalid_function_parameters"},
    {"message": "fake server: script exhausted", "type": "fake_server_error", "code": 400},
    {"message": "Your request was rejected as a result of our safety system.", "code": "content_policy_violation"},
    {"message": "Unsupported parameter: 'logit_bias' is not supported with this model.", "param": "logit_bias",
     "code": "unsupported_parameter"},  # not a parameter triforge sends
])
def test_a_400_about_anything_else_is_not_adapted(body):
    assert read_refusal(_err(**body), BODY, {}) is None


@pytest.mark.parametrize("body, rule", [
    # Google's OpenAI-compatible endpoint: a list of errors; the SDK's text carries none of it
    ([{"error": {"code": 400, "message": 'Invalid JSON payload received. Unknown name "stop": Cannot find field.',
                 "status": "INVALID_ARGUMENT"}}], ("stop", "drop")),
    # FastAPI / pydantic front ends: 422 with a `detail` list
    ({"detail": [{"type": "extra_forbidden", "loc": ["body", "seed"], "msg": "Extra inputs are not permitted",
                  "input": 1}]}, ("seed", "drop")),
    # a plain-text body
    ("Unsupported parameter: temperature", ("temperature", "drop")),
    # about something triforge cannot adapt: left as an error
    ({"detail": [{"type": "missing", "loc": ["body", "messages"], "msg": "Field required"}]}, None),
    ("upstream connect error or disconnect/reset before headers", None),
])
def test_a_refusal_in_a_body_without_a_message_field_is_read_from_the_body(body, rule):
    sent = {**BODY, "seed": 1}
    assert read_refusal(SimpleNamespace(body=body, message="Error code: 400"), sent, {}) == rule


def test_a_parameter_adapted_once_is_never_adapted_again():
    body = strict_refusal(frozenset({"openai-reasoning"}), {"temperature": 0})["error"]
    assert read_refusal(_err(**body), BODY, {"temperature": "drop"}) is None


def test_learned_rules_apply_in_order_and_strip_thinking():
    msgs = [{"role": "assistant", "content": "a", "reasoning_content": "t"}, {"role": "user", "content": "u"}]
    out = apply_learned({**BODY, "messages": msgs}, {"max_tokens": "rename:max_completion_tokens",
                                                      "stop": "drop", "reasoning_content": "drop"})
    assert out["max_completion_tokens"] == 64 and "stop" not in out and "max_tokens" not in out
    assert out["messages"] == [{"role": "assistant", "content": "a"}, {"role": "user", "content": "u"}]
    assert msgs[0]["reasoning_content"] == "t"  # the caller's conversation is not changed


@pytest.mark.parametrize("keep", [False, True])
def test_thinking_is_sent_back_only_when_the_alias_says_so(keep):
    msgs = [{"role": "assistant", "content": "a", "reasoning": "t"}]
    caps = capabilities(ModelConfig(model="m", send_reasoning_back=keep))
    sent = shape_body({"messages": msgs}, caps)["messages"][0]
    assert sent == ({"role": "assistant", "content": "a", "reasoning_content": "t"} if keep
                    else {"role": "assistant", "content": "a"})


def test_declared_capabilities_are_part_of_a_runs_settings_only_when_set():
    from types import SimpleNamespace as NS

    from triforge.core.provenance import model_settings

    plain = model_settings(NS(config=ModelConfig(model="m")))
    declared = model_settings(NS(config=ModelConfig(model="m", reasoning_effort="high", supports_temperature=False)))
    assert "reasoning_effort" not in plain and "supports_temperature" not in plain  # older runs still match
    assert (declared["reasoning_effort"], declared["supports_temperature"]) == ("high", False)
