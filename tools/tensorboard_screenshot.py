#!/usr/bin/env python
"""Screenshot of a TensorBoard dashboard (the README's HParams image), with a headless Chromium.

Needs Qt's Chromium engine, which is not a project requirement:
  pip install PyQt6 PyQt6-WebEngine

Usage (the README's image; start `tensorboard --logdir runs/demo` first):
  python tools/tensorboard_screenshot.py --url "http://127.0.0.1:6006/#hparams" \
      --output docs/images/tb_hparams.png --width 1900 --height 400 --wait 12 \
      --hide "data.*" "test_concat/*" --show test/sacrebleu test/nltk_bleu4 valid/bleu valid/loss
"""

from __future__ import annotations

import argparse
import json
import os
import sys

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("QTWEBENGINE_CHROMIUM_FLAGS", "--no-sandbox --disable-gpu")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", required=True)
    parser.add_argument("--output", required=True, help="the PNG to write")
    parser.add_argument("--width", type=int, default=1600)
    parser.add_argument("--height", type=int, default=900)
    parser.add_argument("--wait", type=float, default=8.0, help="seconds to let the page render after loading")
    parser.add_argument(
        "--show",
        nargs="*",
        default=[],
        metavar="LABEL",
        help="HParams columns to show (TensorBoard ticks only the first five hyperparameters "
        "and metrics): the labels of their checkboxes in the left pane; a label ending "
        "in * stands for every label that starts with the rest",
    )
    parser.add_argument("--hide", nargs="*", default=[], metavar="LABEL", help="HParams columns to hide (as --show)")
    args = parser.parse_args()

    from PyQt6.QtCore import QTimer, QUrl
    from PyQt6.QtWebEngineWidgets import QWebEngineView
    from PyQt6.QtWidgets import QApplication

    app = QApplication(sys.argv)
    view = QWebEngineView()
    view.resize(args.width, args.height)

    def shoot() -> None:
        view.grab().save(args.output)
        print(f"wrote {args.output}")
        app.quit()

    # The dashboard's checkboxes live in nested shadow roots and re-render after each click: flip
    # one box per call, until none is left to flip.
    flip_one = """((show, hide) => {
      const boxes = [];
      const walk = root => root.querySelectorAll('*').forEach(el => {
        if (el.tagName === 'PAPER-CHECKBOX') boxes.push(el);
        if (el.shadowRoot) walk(el.shadowRoot);
      });
      walk(document);
      const match = (labels, label) =>
        labels.some(h => h.endsWith('*') ? label.startsWith(h.slice(0, -1)) : label === h);
      const box = boxes.find(b => b.checked ? match(hide, b.textContent.trim()) : match(show, b.textContent.trim()));
      if (box) box.click();
      return box ? (box.checked ? 'showed ' : 'hid ') + box.textContent.trim() : '';
    })(%s, %s)""" % (json.dumps(args.show), json.dumps(args.hide))

    def set_columns_then_shoot(done: str = "start") -> None:
        if not done:
            QTimer.singleShot(2000, shoot)
            return
        if done != "start":
            print(done)
        QTimer.singleShot(300, lambda: view.page().runJavaScript(flip_one, set_columns_then_shoot))

    view.loadFinished.connect(lambda ok: QTimer.singleShot(int(args.wait * 1000), set_columns_then_shoot))
    view.load(QUrl(args.url))
    view.show()
    return app.exec()


if __name__ == "__main__":
    raise SystemExit(main())
