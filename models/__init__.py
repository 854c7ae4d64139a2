"""The model: the encoder-decoder (`transformer.py`, `attention.py`), its positional encodings
(`positional_encodings/`, their config options in `positional_options.py`, read without torch) and
the builder that reads the `model` config section (`build.py`)."""
