"""Each encoding's config options (models/positional_options.py): the table the config validates
against names the Options every registered encoding declares, each `check` refuses what cannot work
in one line naming the key, and a config is read and judged without importing torch."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from models.positional_encodings import POSITIONAL_ENCODINGS, register
from models.positional_encodings.additive import SinusoidalPositionalEncoding
from models.positional_options import (
    ENCODING_OPTIONS,
    CapeOptions,
    FireOptions,
    LearnableOptions,
    NoOptions,
    RopeOptions,
    ShapeOptions,
    ShawOptions,
    T5BiasOptions,
    XposOptions,
)

ROOT = Path(__file__).resolve().parents[2]


def test_the_table_names_the_options_of_every_built_in_encoding() -> None:
    """Read before any encoding registers (as compare.py reads it, without torch): an encoding whose
    Options were only on its class would be an unknown name to every process that never imports it."""
    code = (
        f"import sys; sys.path.insert(0, {str(ROOT)!r})\n"
        "from models.positional_options import ENCODING_OPTIONS\n"
        "table = dict(ENCODING_OPTIONS)\n"
        "from models.positional_encodings import POSITIONAL_ENCODINGS\n"
        "print(sorted(table) == sorted(POSITIONAL_ENCODINGS))\n"
        "print(all(table[name] is cls.Options for name, cls in POSITIONAL_ENCODINGS.items()))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.stdout.split() == ["True", "True"], out.stderr[-2000:]
    for encoding in POSITIONAL_ENCODINGS.values():  # its fields are the constructor's keyword arguments
        encoding(16, 2, False, **dataclasses.asdict(encoding.Options()))


def test_an_encoding_whose_options_differ_from_the_table_is_refused() -> None:
    @dataclasses.dataclass
    class OtherOptions(NoOptions):
        scale: float = 1.0

    with pytest.raises(TypeError, match="'sinusoidal': its Options are OtherOptions, ENCODING_OPTIONS has"):

        @register("sinusoidal")
        class Redeclared(SinusoidalPositionalEncoding):
            Options = OtherOptions

    assert POSITIONAL_ENCODINGS["sinusoidal"] is SinusoidalPositionalEncoding  # the registry kept the built-in


@pytest.mark.parametrize(
    "options, head_dim, max_len, says",
    [
        (RopeOptions(), 3, 10, "rope needs an even head dimension"),
        (RopeOptions(fraction=0.0), 4, 10, "model.positional.fraction must be in (0, 1]"),
        (RopeOptions(theta=0.0), 4, 10, "model.positional.theta must be positive"),
        (RopeOptions(scaling_factor=0.5), 4, 10, "model.positional.scaling_factor must be >= 1"),
        (RopeOptions(randomized=True, max_position=8), 4, 10, "model.positional.max_position (8) must be at least"),
        (RopeOptions(randomized=True, scaling="yarn"), 4, 10, "with randomized: true they already span"),
        (XposOptions(), 3, 10, "rope needs an even head dimension"),
        (XposOptions(scale_base=0.0), 4, 10, "model.positional.scale_base must be positive"),
        (LearnableOptions(max_positions=10), 4, 10, "max_positions (10) must be at least data.max_len + 1 (11"),
        (LearnableOptions(randomized=True, max_position=64, max_positions=32), 4, 10, "max_position (64)"),
        (ShapeOptions(max_shift=0), 4, 10, "model.positional.max_shift must be at least 1"),
        (ShapeOptions(inference_shift=-1), 4, 10, "model.positional.inference_shift must be >= 0"),
        (CapeOptions(max_local_shift=-0.1), 4, 10, "model.positional.max_local_shift must be >= 0"),
        (CapeOptions(max_global_scaling=0.9), 4, 10, "model.positional.max_global_scaling must be >= 1"),
        (T5BiasOptions(num_buckets=2), 4, 10, "model.positional.num_buckets must be at least 4"),
        (T5BiasOptions(num_buckets=32, max_distance=16), 4, 10, "max_distance (16) must exceed num_buckets / 2"),
        (ShawOptions(clip_distance=0), 4, 10, "model.positional.clip_distance must be at least 1"),
        (FireOptions(hidden=0), 4, 10, "model.positional.hidden must be at least 1"),
        (FireOptions(threshold=0.5), 4, 10, "model.positional.threshold must be at least 1"),
    ],
)
def test_a_value_that_cannot_work_is_one_line_naming_its_key(options, head_dim, max_len, says) -> None:
    with pytest.raises(ValueError) as error:
        options.check(head_dim=head_dim, max_len=max_len)
    assert says in str(error.value) and "\n" not in str(error.value)


def test_the_defaults_of_every_encoding_pass_their_check() -> None:
    for options in ENCODING_OPTIONS.values():
        options().check(head_dim=8, max_len=128)  # the demo's data.max_len


def test_a_config_is_read_and_checked_without_torch() -> None:
    """compare.py, the archive and the study tools read every run's config: importing torch for the
    encodings' options cost each of their starts over a second."""
    code = (
        f"import sys; sys.path.insert(0, {str(ROOT)!r})\n"
        "from settings.config import load_config\n"
        "cfg = load_config('configs/demo/rope.yaml', ['model.positional.theta=500.0'])\n"
        "assert cfg.model.positional.options['theta'] == 500.0\n"
        "import commands.compare, study.run\n"
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0 and out.stdout.strip() == "False", out.stderr[-2000:] + out.stdout
