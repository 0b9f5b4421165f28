#!/usr/bin/python3
"""TransformerLens's head detector in torch, for tests/interp/test_head_scores_reference.cpp.

Usage: reference_head_scores.py IN.json OUT.json

IN holds cases: {"name", "pattern": {"shape", "data"} (B, h, n, m), "ids" (B, n), "key_ids"
(B, m) for cross-attention, "pad_id" (-1: none), "runs": [{"key", "score", "exclude_bos",
"exclude_current_token", "window"}]}. OUT gets {name: {key: [one value per head]}}.

The pattern scores follow transformer_lens/head_detector.py (detect_head, error_measure
"mul"), one unpadded sequence at a time, as detect_head sees it: the detection patterns of
get_previous_token_head_detection_pattern, get_duplicate_token_head_detection_pattern and
get_induction_head_detection_pattern, the score of compute_head_attention_similarity_score
(column 0 and the diagonal zeroed when excluded, then sum(A * D) / sum(A)), and the batch
averaged as detect_head's list branch does (torch.stack(scores).mean(0)). The entropy and the
alignment are qkv's definitions (interp/head_scores.hpp), written here from their formulas:
torch.special.entr for -p log p, and the aligned source position round(i (S-1) / (T-1)) with
halves rounded up, in floating point.
"""
import json
import math
import sys

try:
    import torch
except ImportError as e:
    sys.stderr.write("%s: cannot import torch (%s); install Debian's python3-torch\n"
                     % (sys.executable, e))
    sys.exit(2)


def unflat(j, dtype):
    return torch.tensor(j["data"], dtype=dtype).reshape(j["shape"])


def real_length(row, pad_id):
    """Tokens before the first pad (the whole row without a pad id)."""
    if pad_id < 0:
        return len(row)
    pads = (row == pad_id).nonzero()
    return int(pads[0]) if len(pads) else len(row)


# --- the detection patterns of one sequence of n tokens, (n, n) ---

def previous_token_pattern(tokens):
    n = tokens.shape[-1]
    d = torch.zeros(n, n, dtype=torch.float64)
    d[1:, :-1] = torch.eye(n - 1, dtype=torch.float64)  # the diagonal just below the main one
    return torch.tril(d)


def duplicate_token_pattern(tokens):
    same = (tokens[:, None] == tokens[None, :]).to(torch.float64)
    same.fill_diagonal_(0)  # a token is trivially a copy of itself
    return torch.tril(same)


def induction_pattern(tokens):
    dup = duplicate_token_pattern(tokens)
    shifted = torch.roll(dup, shifts=1, dims=1)  # key j looks at the duplicate at j - 1
    shifted[:, 0] = 0  # what the roll brought round from the last column
    return torch.tril(shifted)


PATTERNS = {"previous_token": previous_token_pattern,
            "duplicate_token": duplicate_token_pattern,
            "induction": induction_pattern}


def mul_score(a, d, exclude_bos, exclude_current_token):
    """A head's pattern a (n, n) against the detection pattern d: the 'mul' measure."""
    a = a.clone()
    if exclude_bos:
        a[:, 0] = 0
    if exclude_current_token:
        a.fill_diagonal_(0)
    return ((a * d).sum() / a.sum()).item()


def detector_score(pattern, ids, pad_id, run):
    per_sequence = []
    for b in range(pattern.shape[0]):
        n = real_length(ids[b], pad_id)
        tokens = ids[b, :n]
        d = PATTERNS[run["score"]](tokens)
        per_sequence.append(torch.tensor(
            [mul_score(pattern[b, h, :n, :n], d, run["exclude_bos"], run["exclude_current_token"])
             for h in range(pattern.shape[1])], dtype=torch.float64))
    return torch.stack(per_sequence).mean(0).tolist()


def entropy_score(pattern, ids, pad_id):
    rows = pattern.sum(-1) > 0.5  # (B, h, n): rows that attend somewhere
    for b in range(pattern.shape[0]):
        rows[b, :, real_length(ids[b], pad_id):] = False
    h = torch.special.entr(pattern).sum(-1)
    return ((h * rows).sum((0, 2)) / rows.sum((0, 2))).tolist()


def aligned_source(i, t, s):
    if t == 1:
        return 0
    return math.floor(i * (s - 1) / (t - 1) + 0.5)


def alignment_score(pattern, ids, key_ids, pad_id, window):
    per_sequence = []
    for b in range(pattern.shape[0]):
        t, s = real_length(ids[b], pad_id), real_length(key_ids[b], pad_id)
        d = torch.zeros(t, s, dtype=torch.float64)
        for i in range(t):
            c = aligned_source(i, t, s)
            d[i, max(0, c - window):c + window + 1] = 1
        a = pattern[b, :, :t, :s]  # (h, T, S): the real target rows over the real source
        per_sequence.append((a * d).sum((1, 2)) / a.sum((1, 2)))
    return torch.stack(per_sequence).mean(0).tolist()


def run_case(c):
    pattern = unflat(c["pattern"], torch.float64)
    ids = unflat(c["ids"], torch.int64)
    key_ids = unflat(c["key_ids"], torch.int64) if "key_ids" in c else None
    pad = c["pad_id"]
    out = {}
    for run in c["runs"]:
        if run["score"] in PATTERNS:
            out[run["key"]] = detector_score(pattern, ids, pad, run)
        elif run["score"] == "entropy":
            out[run["key"]] = entropy_score(pattern, ids, pad)
        elif run["score"] == "alignment":
            out[run["key"]] = alignment_score(pattern, ids, key_ids, pad, run["window"])
        else:
            raise ValueError("unknown score " + run["score"])
    return out


def main():
    if len(sys.argv) != 3:
        sys.stderr.write(__doc__)
        sys.exit(2)
    with open(sys.argv[1]) as f:
        cases = json.load(f)
    out = {c["name"]: run_case(c) for c in cases}
    with open(sys.argv[2], "w") as f:
        json.dump(out, f)
    print("scored %d cases" % len(cases))


if __name__ == "__main__":
    main()
