"""The references for tests/data/test_metrics_reference.cpp, run with /usr/bin/python3.

    reference_bleu.py DIR

DIR/hyp.txt and DIR/ref.txt hold pre-tokenized, line-aligned text: NLTK's corpus_bleu (uniform
4-gram weights, no smoothing) times 100 goes to DIR/nltk.txt. On such text, when every n-gram
order has matches, NLTK's BLEU and sacreBLEU's are the same number.

DIR/lines.txt holds raw lines: each tokenized by the 13a rules written with Python's re, as
sacreBLEU's published tokenizer writes them, goes to DIR/13a.txt, so qkv's byte-wise emulation
of the regular expressions is checked against Python's own engine.
"""
import re
import sys

from nltk.translate.bleu_score import corpus_bleu


def tokenize_13a(line):
    for a, b in (("<skipped>", ""), ("-\n", ""), ("\n", " "), ("&quot;", '"'),
                 ("&amp;", "&"), ("&lt;", "<"), ("&gt;", ">")):
        line = line.replace(a, b)
    line = f" {line} "
    rules = [
        (r"([\{-\~\[-\` -\&\(-\+\:-\@\/])", r" \1 "),
        (r"([^0-9])([\.,])", r"\1 \2 "),
        (r"([\.,])([^0-9])", r" \1 \2"),
        (r"([0-9])(-)", r"\1 \2 "),
    ]
    for pattern, repl in rules:
        line = re.sub(pattern, repl, line)
    return " ".join(line.split())


def main(d):
    def read(name):
        with open(f"{d}/{name}", encoding="utf-8", newline="\n") as f:
            return f.read().split("\n")[:-1]

    hyps, refs = read("hyp.txt"), read("ref.txt")
    score = corpus_bleu([[r.split()] for r in refs], [h.split() for h in hyps])
    with open(f"{d}/nltk.txt", "w") as f:
        f.write("%.17g\n" % (100 * score))
    with open(f"{d}/13a.txt", "w", encoding="utf-8", newline="\n") as f:
        for line in read("lines.txt"):
            f.write(tokenize_13a(line) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
