#!/usr/bin/env python
"""Screenshot of a TensorBoard dashboard (the README's HParams image), with a headless Chromium.

Needs Qt's Chromium engine, which is not a project requirement:
  pip install PyQt6 PyQt6-WebEngine

Usage:
  python docs/tools/tensorboard_screenshot.py --url "http://127.0.0.1:6006/#hparams" --out docs/images/tb_hparams.png
(start `tensorboard --logdir runs/demo` first).
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("QTWEBENGINE_CHROMIUM_FLAGS", "--no-sandbox --disable-gpu")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--width", type=int, default=1600)
    parser.add_argument("--height", type=int, default=900)
    parser.add_argument("--wait", type=float, default=8.0, help="seconds to let the page render after loading")
    args = parser.parse_args()

    from PyQt6.QtCore import QTimer, QUrl
    from PyQt6.QtWebEngineWidgets import QWebEngineView
    from PyQt6.QtWidgets import QApplication

    app = QApplication(sys.argv)
    view = QWebEngineView()
    view.resize(args.width, args.height)

    def shoot() -> None:
        view.grab().save(args.out)
        print(f"wrote {args.out}")
        app.quit()

    view.loadFinished.connect(lambda ok: QTimer.singleShot(int(args.wait * 1000), shoot))
    view.load(QUrl(args.url))
    view.show()
    return app.exec()


if __name__ == "__main__":
    raise SystemExit(main())
