"""An invalid endpoint URL is a configuration error at once: one line, exit 2, no retries."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from triforge.core.config import ModelConfig, Settings, check_base_url, resolve_model
from triforge.core.errors import ConfigError

BAD = ["not-a-url", "localhost:8000/v1", "http://", "ftp://example.com/v1", "http://host:99999/v1",
       "http://exa mple.com/v1", "//host/v1", ""]
GOOD = ["http://127.0.0.1:8000/v1", "https://api.openai.com/v1", "http://[::1]:8080/v1", "http://localhost:11434",
        "https://my-proxy.example.org/openai/v1/"]


@pytest.mark.parametrize("url", BAD)
def test_invalid_urls_are_refused_naming_where_they_came_from(url):
    with pytest.raises(ConfigError, match=r"--base-url .* is not a valid URL"):
        check_base_url(url, "--base-url")


@pytest.mark.parametrize("url", GOOD)
def test_valid_urls_are_accepted(url):
    assert check_base_url(url, "--base-url") == url
    assert resolve_model("m", Settings(), base_url=url)[1].base_url == url


def test_sources_are_named(monkeypatch):
    monkeypatch.setenv("TRIFORGE_BASE_URL", "nonsense")
    with pytest.raises(ConfigError, match="TRIFORGE_BASE_URL 'nonsense'"):
        resolve_model("m", Settings())
    monkeypatch.delenv("TRIFORGE_BASE_URL")
    settings = Settings(models={"mine": ModelConfig(model="m", base_url="htp:/oops")})
    with pytest.raises(ConfigError, match=r"base_url of \[models.mine\] 'htp:/oops'"):
        resolve_model("mine", settings)


def test_cli_with_a_bad_url_fails_at_once_in_one_line(tmp_path):
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "triforge.cli.app", "llm", "chat", "--model", "m", "--base-url",
                        "not-a-url", "hi"], capture_output=True, text=True, timeout=60, cwd=tmp_path,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert "is not a valid URL" in r.stderr and "unreachable" not in r.stderr and "retr" not in r.stderr
    assert time.monotonic() - t0 < 30  # no retries with backoff
