#!/usr/bin/env python3
"""Writes the dense-match benchmark page (issue #18, part 2) to stdout.

An HTML page in the manner of a generated book chapter (mdBook's layout: a sidebar, headings,
paragraphs with inline <code>, links, highlighted code blocks full of class attributes), about
2 MB, in which the ten rules of bench/substitution.sh's dense set find a match every ~100 bytes:
class attributes, <code>, the words Cargo/cargo, crate, dependency, registry (any case), links to
doc.rust-lang.org and github.com, http:// links and an analytics id.

Deterministic: the same bytes on every machine and every Python 3 (a fixed linear congruential
generator, no `random`). Usage: bench/dense_page.py [SIZE_BYTES] > page.html (default 2000000).
A few non-ASCII characters (curly quotes, an e with an accent, an arrow) keep the engine's UTF-8
paths honest.
"""

import sys


class Lcg:
    """Numerical Recipes' 32-bit LCG: fixed, so the page never changes."""

    def __init__(self, seed):
        self.state = seed & 0xFFFFFFFF

    def below(self, n):
        self.state = (self.state * 1664525 + 1013904223) & 0xFFFFFFFF
        return (self.state >> 8) % n

    def pick(self, items):
        return items[self.below(len(items))]


WORDS = (
    "the a an of to in and or for with from that this is are be as on by it at build "
    "package manifest version features compile target workspace lock file source path "
    "command line option flag test bench release profile optimization binary library "
    "example project module function type trait struct enum macro attribute edition "
    "install publish update fetch vendor tree metadata resolver index network offline "
    "environment variable configuration directory home toolchain rustc rustdoc documentation "
    "caf\u00e9 \u201cquoted\u201d next\u2192"
).split()
# Words the rules rewrite, mixed into the prose (the case-insensitive one in three cases).
TARGETS = ("Cargo", "cargo", "crate", "dependency", "registry", "Registry", "REGISTRY")
CLASSES = (
    "hljs-keyword", "hljs-string", "hljs-comment", "hljs-number", "hljs-title", "hljs-attr",
    "hljs-built-in", "hljs-punctuation", "language-toml", "language-console", "language-rust",
    "chapter-item", "section-header", "header", "boring", "fa-copy", "clip-button", "hidden",
)
DOCS = ("std/collections/struct.HashMap.html", "book/ch14-00-more-about-cargo.html",
        "cargo/reference/manifest.html", "rustc/command-line-arguments.html",
        "cargo/reference/specifying-dependencies.html", "std/primitive.str.html")
REPOS = ("rust-lang/cargo", "rust-lang/crates.io", "serde-rs/serde", "tokio-rs/tokio",
         "clap-rs/clap", "dtolnay/anyhow")


def sentence(rng):
    words = []
    for _ in range(6 + rng.below(10)):
        if rng.below(30) == 0:
            words.append(rng.pick(TARGETS))
        else:
            words.append(rng.pick(WORDS))
    return " ".join(words)


def paragraph(rng):
    parts = []
    for _ in range(3 + rng.below(3)):
        s = sentence(rng)
        r = rng.below(12)
        if r == 0:
            s += ' see <a href="https://doc.rust-lang.org/%s">the docs</a>' % rng.pick(DOCS)
        elif r == 1:
            s += ' (<a href="https://github.com/%s/issues/%d">issue</a>)' % (
                rng.pick(REPOS), 100 + rng.below(9000))
        elif r == 2:
            s += ' with <code>cargo %s</code>' % rng.pick(("build", "test", "tree", "add"))
        elif r == 3:
            s += ' <a href="http://example.org/%s">mirror</a>' % rng.pick(WORDS)
        parts.append(s[0].upper() + s[1:] + ".")
    return '<p class="%s">%s</p>\n' % (rng.pick(CLASSES), " ".join(parts))


def code_block(rng):
    lines = []
    for _ in range(3 + rng.below(5)):
        spans = []
        for _ in range(2 + rng.below(3)):
            if rng.below(3) == 0:
                spans.append('<span class="%s">%s</span>' % (rng.pick(CLASSES), rng.pick(WORDS)))
            else:
                spans.append(" ".join(rng.pick(WORDS) for _ in range(1 + rng.below(3))))
        lines.append(" = ".join(spans))
    return ('<pre><code class="%s">%s</code></pre>\n'
            % (rng.pick(("language-toml", "language-rust", "language-console")),
               "\n".join(lines)))


def main():
    size = int(sys.argv[1]) if len(sys.argv) > 1 else 2_000_000
    rng = Lcg(20261203)
    out = [
        '<!DOCTYPE html>\n<html lang="en" class="light sidebar-visible" dir="ltr">\n<head>\n'
        '<meta charset="UTF-8">\n<title>Cargo reference (generated benchmark page)</title>\n'
        "<script>ga('create', 'UA-12345678-1', 'auto');</script>\n</head>\n<body>\n"
        '<nav id="sidebar" class="sidebar"><ol class="chapter">\n'
    ]
    for i in range(40):
        out.append('<li class="chapter-item"><a href="cargo/ch%02d.html">%d. %s</a></li>\n'
                   % (i, i, rng.pick(TARGETS)))
    out.append('</ol></nav>\n<main>\n')
    length = sum(len(s.encode()) for s in out)
    section = 0
    tail = "</main>\n</body>\n</html>\n"
    while length < size - len(tail):
        r = rng.below(10)
        if r == 0:
            section += 1
            s = ('<h2 id="s%d" class="section-header"><a href="#s%d">%d. The %s</a></h2>\n'
                 % (section, section, section, rng.pick(TARGETS)))
            if section % 50 == 0:
                s += "<script>ga('send', 'UA-%d-%d');</script>\n" % (
                    10000000 + rng.below(89999999), 1 + rng.below(9))
        elif r < 2:
            s = code_block(rng)
        else:
            s = paragraph(rng)
        out.append(s)
        length += len(s.encode())
    out.append(tail)
    sys.stdout.buffer.write("".join(out).encode())


if __name__ == "__main__":
    main()
