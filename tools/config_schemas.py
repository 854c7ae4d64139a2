"""Write (or --check) the JSON Schemas editors read for the files under configs/: schema.json (a run
config, its `base:` files resolved), overlay.schema.json (a config file as written: it may name its
`base:` files) and family.schema.json (a study's declared family). `make config-schema` writes them;
tests/tools/test_config_schemas.py fails when one is out of date.

    python tools/config_schemas.py [--check]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pydantic import TypeAdapter

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from settings.schema import ExperimentConfig  # noqa: E402
from study.read.family import Family  # noqa: E402

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
DRAFT = "https://json-schema.org/draft/2020-12/schema"


def json_schema(overlay: bool = False) -> dict:
    """The JSON Schema of a run config, its `base:` files resolved (configs/schema.json); with
    `overlay`, of a config file as written, which may name its `base:` files (configs/overlay.schema.json:
    a run config, a base.yaml, a partial file such as configs/report/size.yaml). Every key is optional
    in both: a key left out takes its default."""
    schema = TypeAdapter(ExperimentConfig).json_schema()
    schema["title"] = "A config file as written" if overlay else "A run config (its base: files resolved)"
    if overlay:  # an encoding's options may be written without the name a base file gives
        positional = schema["$defs"]["ModelConfig"]["properties"]["positional"]
        positional["anyOf"] = [{k: v for k, v in b.items() if k != "required"} for b in positional.pop("oneOf")]
        path = {"type": "string", "minLength": 1}
        base = {"anyOf": [path, {"type": "array", "items": path}], "description": "config file(s) to put this over"}
        schema["properties"] = {"base": base, **schema["properties"]}
    return {"$schema": DRAFT, **schema}


def schemas() -> dict[str, str]:
    """{file name under configs/: its text}."""
    made = {"schema.json": json_schema(), "overlay.schema.json": json_schema(overlay=True)}
    made["family.schema.json"] = {"$schema": DRAFT, **Family.model_json_schema()}  # (study/read/family.py)
    return {name: json.dumps(schema, indent=1) + "\n" for name, schema in made.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a schema file is not current")
    args = parser.parse_args(argv)
    stale = []
    for name, text in schemas().items():
        path = CONFIGS / name
        current = path.read_text(encoding="utf-8") if path.is_file() else None
        if current == text:
            continue
        stale.append(name)
        if not args.check:
            tmp = path.with_suffix(".tmp")
            tmp.write_text(text, encoding="utf-8")
            tmp.replace(path)
    if args.check and stale:
        print(f"configs/{', configs/'.join(stale)} out of date: run `make config-schema`", file=sys.stderr)
        return 1
    print(f"{'stale' if args.check else 'written'}: {', '.join(stale) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
