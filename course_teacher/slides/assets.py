"""The browser libraries a deck loads, copied from slides/node_modules/ beside the decks."""

import shutil
from pathlib import Path

from ..build import ROOT

SLIDES = ROOT / "slides"
NODE_MODULES = SLIDES / "node_modules"

#: What is copied from slides/node_modules/ into slides/decks/assets/: (package, paths inside it).
#: MathJax without its unpacked sources, test pages, accessibility extension (which names a CDN)
#: and fonts other than the TeX woff set the CommonHTML output uses; reveal.js's white (light)
#: and black (dark) themes only.
ASSET_FILES = {
    "reveal.js": ["dist/reveal.css", "dist/reset.css", "dist/reveal.js", "dist/theme/white.css",
                  "dist/theme/black.css", "dist/theme/fonts/source-sans-pro", "plugin/notes/notes.js",
                  "LICENSE"],
    "mathjax": ["MathJax.js", "config/TeX-AMS_CHTML-full.js", "config/Safe.js", "extensions", "jax/input/TeX", "jax/element",
                "jax/output/CommonHTML", "fonts/HTML-CSS/TeX/woff", "localization", "LICENSE"],
    "requirejs": ["require.js"],
    "jquery": ["dist/jquery.min.js", "LICENSE.txt"],
}  # fmt: skip
ASSET_EXCLUDE = ("extensions/a11y",)


def missing_packages():
    return [name for name in ASSET_FILES if not (NODE_MODULES / name / "package.json").exists()]


def copy_assets(assets):
    """Copy the browser libraries from slides/node_modules/ into `assets` (slides/decks/assets/)."""
    missing = missing_packages()
    if missing:
        raise SystemExit(
            f"slides: {', '.join(missing)} not installed in {NODE_MODULES.relative_to(ROOT)}: "
            "run `make slides` (it runs `npm ci --prefix slides`)"
        )
    if assets.exists():
        shutil.rmtree(assets)
    for package, paths in ASSET_FILES.items():
        for relative in paths:
            source, target = NODE_MODULES / package / relative, assets / package / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            if source.is_dir():
                shutil.copytree(
                    source, target,
                    ignore=lambda folder, names, package=package: [
                        name for name in names
                        if any(f"{package}/{x}" in (Path(folder) / name).as_posix() for x in ASSET_EXCLUDE)
                    ],
                )  # fmt: skip
            else:
                shutil.copy2(source, target)
