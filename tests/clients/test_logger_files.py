"""The readers of W&B's and TensorBoard's files (clients/python/evolab_client/wandb_files.py, tensorboard_files.py),
on files the real loggers wrote: a file read in pieces, cut anywhere (a writer mid-record, a follower restarted at
the offset it kept), gives every point once; a damaged file is refused naming the byte."""
import os
import subprocess
import sys

import numpy as np
import pytest

from evolab_client.tensorboard_files import TensorboardFileError, TensorboardRun
from evolab_client.wandb_files import BLOCK, WandbFileError, WandbRun

WANDB_WRITER = r"""
import wandb
run = wandb.init(project="cuts", name="long-run", config={"model": {"path": "Qwen/Qwen3-4B"}, "lr": 1e-6})
for step in range(400):  # past a 32 KiB block, so records are split over blocks
    wandb.log({"actor/entropy": 1.0 / (step + 1), "a": {"b": step}, "flag": step % 2 == 0,
               "note": "text"}, step=step)
wandb.log({"hist": wandb.Histogram([1.0, 2.0, 2.0])}, step=400)
run.finish()
"""


@pytest.fixture(scope="module")
def wandb_file(tmp_path_factory):
    folder = tmp_path_factory.mktemp("wandb")
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_DIR": str(folder), "WANDB_SILENT": "true"}
    subprocess.run([sys.executable, "-c", WANDB_WRITER], cwd=folder, env=env, check=True, timeout=300)
    (path,) = [p for p in folder.glob("wandb/offline-run-*/run-*.wandb")]
    return path


def read_in_pieces(read, data: bytes, cuts, tmp_path):
    """Each piece as a follower sees it: the file as far as the writer got, read from the offset kept."""
    partial = tmp_path / "partial"
    offset, pieces = 0, []
    for cut in list(cuts) + [len(data)]:
        partial.write_bytes(data[:cut])
        got, offset = read(partial, offset)
        pieces.append(got)
    return pieces, offset


def test_a_wandb_file_cut_anywhere_gives_every_point_once(wandb_file, tmp_path):
    whole, end = WandbRun(wandb_file).read(0)
    data = wandb_file.read_bytes()
    assert end == len(data) and len(data) > 2 * BLOCK
    # a row's items come in the order W&B's core wrote them, which varies from run to run (a Go map's)
    assert sorted((p.key, p.value, p.step) for p in whole.points[:3]) == [("a.b", 0.0, 0), ("actor/entropy", 1.0, 0),
                                                                          ("flag", 1.0, 0)]
    assert len(whole.points) == 400 * 3 and whole.skipped == {"other": 400, "histogram": 1}
    assert whole.config == {"model.path": "Qwen/Qwen3-4B", "lr": "1e-06"} and whole.finished is True
    assert whole.run["project"] == "cuts" and whole.run["name"] == "long-run"

    reader = WandbRun(tmp_path / "partial")

    def read(path, offset):
        batch, end = reader.read(offset)
        return batch.points, end

    cuts = sorted({*range(0, len(data), 997), BLOCK - 3, BLOCK, BLOCK + 7, 2 * BLOCK - 1})
    pieces, end = read_in_pieces(read, data, cuts, tmp_path)
    assert end == len(data)
    assert [p for piece in pieces for p in piece] == whole.points


def test_a_damaged_wandb_record_is_refused_naming_its_byte(wandb_file, tmp_path):
    data = bytearray(wandb_file.read_bytes())
    data[5000] ^= 0xFF
    damaged = tmp_path / "run-damaged.wandb"
    damaged.write_bytes(bytes(data))
    with pytest.raises(WandbFileError, match=r"run-damaged\.wandb: .*at byte \d+"):
        WandbRun(damaged).read(0)
    other = tmp_path / "run-other.wandb"
    other.write_bytes(b"not a wandb file at all")
    with pytest.raises(WandbFileError, match="not a W&B run file"):
        WandbRun(other).read(0)


TB_WRITER = r"""
import sys
import numpy as np
from torch.utils.tensorboard import SummaryWriter
writer = SummaryWriter(sys.argv[1])
for step in range(500):
    writer.add_scalar("train/loss", 1.0 / (step + 1), step)
    writer.add_scalar("train/kl", step * 1e-4, step)
writer.add_histogram("weights", np.arange(10.0), 0)
writer.close()
"""


def test_an_event_file_cut_anywhere_gives_every_point_once(tmp_path):
    folder = tmp_path / "tb"
    subprocess.run([sys.executable, "-c", TB_WRITER, str(folder)], check=True, timeout=300)
    run = TensorboardRun(folder)
    (path,) = run.files()
    points, params, skipped, end = run.read(path, 0)
    data = path.read_bytes()
    assert end == len(data) and len(points) == 1000 and skipped == {"histo": 1}
    assert points[1].key == "train/kl" and points[-1].value == float(np.float32(499 * 1e-4))

    def read(partial, offset):
        got, _, _, end = run.read(partial, offset)
        return got, end

    pieces, end = read_in_pieces(read, data, range(0, len(data), 331), tmp_path)
    assert end == len(data) and [p for piece in pieces for p in piece] == points

    damaged = bytearray(data)
    second = 12 + int.from_bytes(data[:8], "little") + 4  # where the second record starts
    damaged[second] ^= 0xFF  # its length: the length's checksum no longer matches
    (tmp_path / "damaged").write_bytes(bytes(damaged))
    with pytest.raises(TensorboardFileError, match=f"damaged: damaged record length at byte {second}"):
        run.read(tmp_path / "damaged", 0)
