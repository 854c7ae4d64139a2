"""A trained model as files: checkpoints (checkpoint.py), export folders (export.py writes them,
export_reading.py reads them back), which model a command means (lookup.py), the config it is tested
under (test_time.py), loading it for decoding (loading.py: `LoadedModel`) and its CTranslate2
conversion (ctranslate2_conversion.py). Below training and evaluation, above models, tokenizer and
decoding (docs/DESIGN.md, "Layers")."""
