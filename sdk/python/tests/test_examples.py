import importlib.util
import os
import re
import subprocess
import sys

from conftest import REPO, wait_for
from test_verify import SECRET, signed

EXAMPLES = REPO / "sdk" / "python" / "examples"


def load(name):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_flask_receiver_verifies_and_processes_each_fire_once():
    mod = load("receiver_flask")
    mod.secret = SECRET
    c = mod.app.test_client()
    body = b'{"hello":"chime"}'
    headers = signed(body, msg_id="acme/job/7")
    assert c.post("/hook", data=body, headers=headers).json["status"] == "processed"
    assert c.post("/hook", data=body, headers=headers).json["status"] == "already processed"
    assert mod.work == [body]
    assert c.post("/hook", data=b"tampered", headers=headers).status_code == 401


def test_readme_quickstart_runs(chime_dev, receiver):
    """The main README's Python quick start is examples/quickstart.py, and it runs."""
    code = (EXAMPLES / "quickstart.py").read_text()
    readme = (REPO / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, re.S)
    assert code in blocks, "README.md's Python quick start must be sdk/python/examples/quickstart.py, verbatim"
    env = {**os.environ, "CHIME_URL": chime_dev.base_url, "CHIME_TOKEN": chime_dev.admin_token,
           "CHIME_STATE_DIR": str(chime_dev.state_dir), "CHIME_HOOK": receiver.url + "/quickstart"}
    out = subprocess.run([sys.executable, str(EXAMPLES / "quickstart.py")], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "published" in out.stdout
    wait_for("both quick start callbacks", lambda: len(receiver.calls_to("/quickstart")) >= 2, timeout=60)
