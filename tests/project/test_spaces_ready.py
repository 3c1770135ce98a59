"""Hugging Face Spaces: README front matter, and a Dockerfile that serves the app as uid 1000 on port 7860."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import urllib.request

from tests.app_server import free_port
from tests.paths import REPO_ROOT as ROOT


def front_matter() -> dict[str, str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    match = re.match(r"---\n(.*?)\n---\n", text, re.S)
    assert match, "README.md must start with a --- front matter block (Spaces reads it)"
    pairs = (line.split(":", 1) for line in match.group(1).splitlines() if ":" in line)
    return {k.strip(): v.strip().strip('"') for k, v in pairs}


def test_readme_front_matter_names_the_gradio_app():
    meta = front_matter()
    assert meta["sdk"] == "gradio" and meta["app_file"] == "app.py" and (ROOT / meta["app_file"]).is_file()
    assert re.fullmatch(r"3\.\d+", meta["python_version"])


def dockerfile_lines() -> list[str]:
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")  # join continuation lines
    return [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]


def test_dockerfile_runs_the_app_as_uid_1000_on_port_7860():
    lines = dockerfile_lines()
    user_line = next(line for line in lines if "useradd" in line)
    user = re.search(r"-u\s+1000\s+(\S+)", user_line)
    assert user, f"the image's user must have uid 1000: {user_line}"
    users = [line.split()[1] for line in lines if line.startswith("USER ")]
    assert users and users[-1] in (user.group(1), "1000")  # the CMD runs as that user, not root
    env = " ".join(line for line in lines if line.startswith("ENV "))
    assert "GRADIO_SERVER_PORT=7860" in env and "GRADIO_SERVER_NAME=0.0.0.0" in env
    assert "EXPOSE 7860" in lines
    assert lines[-1].startswith("CMD") and "app.py" in lines[-1]
    assert lines.index(next(line for line in lines if line.startswith("USER "))) > lines.index(user_line)


def test_dockerfile_data_dir_is_one_the_app_user_can_fill():
    """The app fetches missing datasets at first start into MLSE_DATA: uid 1000 must be able to create it."""
    lines = dockerfile_lines()
    env = " ".join(line for line in lines if line.startswith("ENV "))
    data_dir = re.search(r"MLSE_DATA=(\S+)", env).group(1)
    assert data_dir.startswith("/home/user/"), f"MLSE_DATA={data_dir} is not under the app user's home"
    user_at = lines.index(next(line for line in lines if line.startswith("USER ")))
    assert any(f"mkdir -p {data_dir}" in line for line in lines[user_at:])  # made by the user, not by root


def test_docker_build_context_leaves_out_runs_and_history():
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".git", "runs/"} <= set(ignored)


def test_python_app_py_serves_the_page_on_the_port_it_is_given(tmp_path):
    """The real entry point, as Spaces and the Dockerfile start it: host and port from the environment."""
    port = free_port()
    env = {
        **os.environ,
        "GRADIO_SERVER_NAME": "127.0.0.1",
        "GRADIO_SERVER_PORT": str(port),
        "MLSE_RUNS": str(tmp_path / "runs"),
        "GRADIO_ANALYTICS_ENABLED": "False",
    }
    proc = subprocess.Popen(
        [sys.executable, "app.py"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline, page = time.monotonic() + 180, None
        while page is None and time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2) as response:
                    page = response.read().decode("utf-8", "replace")
            except OSError:
                time.sleep(0.2)
        assert page is not None, f"no page on port {port}; app.py exit code {proc.poll()}"
        assert "mlse" in page
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
