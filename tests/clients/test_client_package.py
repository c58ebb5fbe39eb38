"""The client package (clients/python) is pure Python: it imports and runs its command without Django or torch,
as it does on a training host that has neither (or a trainer's own, different versions)."""
import subprocess
import sys
from pathlib import Path

CLIENT = Path(__file__).resolve().parents[2] / "clients" / "python"

BLOCKED = r"""
import sys
class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("django", "torch", "webapp", "rl", "workers", "transformers", "mlflow", "requests"):
            raise ImportError(f"{name} is not on a training host")
sys.meta_path.insert(0, Refuse())
sys.path.insert(0, sys.argv[1])
import evolab_client, evolab_client.cli, evolab_client.verl
from evolab_client import Evolab
print(evolab_client.__version__)
sys.argv = ["evolab", "sync", "verl", "--help"]
evolab_client.cli.main()
"""


def test_the_package_and_its_command_need_nothing_but_the_standard_library():
    done = subprocess.run([sys.executable, "-c", BLOCKED, str(CLIENT)], capture_output=True, text=True, timeout=60)
    assert "0.1.0" in done.stdout and "--run RUN" in done.stdout, done.stderr


def test_without_a_server_or_a_token_the_command_says_what_to_set(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(CLIENT)}
    done = subprocess.run([sys.executable, "-m", "evolab_client.cli", "sync", "verl", str(tmp_path), "--run", "1"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 2 and "EVOLAB_URL" in done.stderr


STEP_FILES = """
import sys
sys.path.insert(0, sys.argv[1])
from evolab_client.verl import step_files
print([(step, path.name) for step, path in step_files(sys.argv[2])])
"""


def test_only_a_whole_step_number_dot_jsonl_is_a_step_of_verls_dumps(tmp_path):
    # `$` matches before a final newline: "3.jsonl\n" was read as a second dump of step 3
    for name in ("3.jsonl", "3.jsonl\n", "12.jsonl", "notes.jsonl"):
        (tmp_path / name).write_text("")
    done = subprocess.run([sys.executable, "-c", STEP_FILES, str(CLIENT), str(tmp_path)], capture_output=True,
                          text=True, timeout=60)
    assert done.stdout.strip() == "[(3, '3.jsonl'), (12, '12.jsonl')]", done.stderr


def test_installing_the_client_from_the_checkout_leaves_git_nothing_new(tmp_path):
    # `pip install ./clients/python` builds in the package's folder (build/, *.egg-info): ignored, never untracked
    if subprocess.run(["git", "-C", str(CLIENT), "rev-parse"], capture_output=True).returncode != 0:
        import pytest
        pytest.skip("not a git checkout")
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                           "--target", str(tmp_path / "site"), str(CLIENT)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "site" / "evolab_client" / "cli.py").exists()
    status = subprocess.run(["git", "-C", str(CLIENT), "status", "--porcelain", "--untracked-files=all", "."],
                            capture_output=True, text=True).stdout
    assert [line for line in status.splitlines() if line.startswith("??")] == []
