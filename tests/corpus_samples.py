"""Small corpora the data tests share: planted leaks between splits, a Tatoeba export whose sources
come back with other translations, parallel-text pairs as the fixtures in tests/fixtures/ hold them
(train.tags.*, the WIT3 XML, train.*), and writers of the files the readers take."""

from __future__ import annotations

import gzip
from pathlib import Path


def planted_splits() -> dict[str, list[tuple[str, str]]]:
    """Known leaks: each comment says what the pair shares with train (or valid)."""
    train = [
        ("Je t'aime !", "I love you."),
        ("Il pleut.", "It is raining."),
        ("Bonjour.", "Hello."),
        ("Bonjour.", "Hello."),  # exact duplicate inside train
        ("bonjour", "Hello."),  # the same up to case and punctuation: not an exact duplicate
        ("Merci.", "Thanks."),
    ]
    valid = [
        ("MERCI", "thank you"),  # source only (case, punctuation)
        ("Autre chose.", "Something else."),  # nothing
        ("nouveau", "new"),
    ]  # nothing with train; the source of two test pairs
    test = [
        ("je t aime", "I adore you."),  # source only
        ("il pleut", "It is raining!"),  # source, target and so the pair
        ("Salut.", "hello"),  # target only
        ("Nouveau.", "New."),  # nothing with train; source in valid
        ("Nouveau.", "New."),
    ]  # exact duplicate inside test
    return {"train": train, "valid": valid, "test": test}


def write_tatoeba(path: Path, pairs: list[tuple[str, str]]) -> Path:
    """(English, French) pairs as the manythings.org export writes them."""
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for i, (en, fr) in enumerate(pairs):
            f.write(f"{en}\t{fr}\tCC-BY 2.0 (France) Attribution: tatoeba.org #{i}\n")
    return path


LOVE = [("I love you.", "Je t'aime."), ("I'm in love with you.", "Je t'aime."), ("Love you!", "je t'aime !")]


HELLO = [("Hello.", "Bonjour."), ("Hello.", "Salut.")]  # one English source, two French ones


def write_tsv(path: Path, pairs: list[tuple[str, str]]) -> dict:
    path.write_text("".join(f"{s}\t{t}\n" for s, t in pairs), encoding="utf-8")
    return {"tsv": str(path)}


TAGS_PAIRS = [
    ("Merci beaucoup, Chris.", "Thank you so much, Chris."),
    (
        "C'est vraiment un honneur d'avoir l'opportunité de venir sur cette scène une deuxième fois.",
        "And it's truly a great honor to have the opportunity to come to this stage twice.",
    ),
    ("Je suis extrêmement reconnaissant.", "I'm extremely grateful."),
    ("Bonjour & bienvenue.", "Hello & welcome."),
]


XML_PAIRS = [
    ("Il y a 20 ans, j'ai inventé le Web.", "20 years ago, I invented the Web."),
    ("Les données & les documents.", "Data & documents."),
    ("Ce n'est pas nouveau.", "This is not new."),
    ("Le paludisme tue encore <beaucoup> de gens.", "Malaria still kills <many> people."),
    ("Merci.", "Thank you."),
]


PLAIN_PAIRS = [
    ("Bonjour le monde.", "Hello world."),
    ("Il fait beau aujourd\u2019hui.", "It is sunny today."),
    ("", ""),
    ("Au revoir\u00a0!", "Goodbye!"),
]
