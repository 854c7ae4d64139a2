"""The experiment's settings: a YAML config read into typed, validated sections, and what each key
may change and when. A layer of its own above models/ (an encoding's options are validated by the
encoding's own `Options`, read from the registry where the encodings live) and below every layer
that reads a config (docs/DESIGN.md, "Layers"):

- `config.py`: loading (`base:` files, `--set` overrides parsed once), validation, writing;
- `schema.py`: the sections and their keys (`setting(...)`: default, bounds, role, flags);
- `positional.py`: `model.positional`, the encoding's name and its own options;
- `checks.py`: the checks across keys; `errors.py`: one line per invalid key;
- `types.py`: strict numbers; `yaml_files.py`: the strict YAML loader;
- `key_roles.py`: which keys a resume or a test may change, and which tell configurations apart.
"""
