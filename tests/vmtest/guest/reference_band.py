"""The reference models' band: the range each cost-model term spans over
m-47-model.sh's reference io.cost.model lines (the profile, and where it
has one the second profile or the caps' model), and how far a value lies
outside it. m-47's judge (the fit) and judge_best (the caps' best linear
model) both measure against it.
"""


def parse(line):
    """{term: value} of an io.cost.model line ("MAJ:MIN ctrl=user model=linear rbps=...")."""
    return {k: int(v) for k, v in (t.split("=") for t in line.split()[3:])}


def band(lines):
    """{term: (lowest, highest)} over the non-empty lines."""
    refs = [parse(line) for line in lines if line]
    return {k: (min(r[k] for r in refs), max(r[k] for r in refs)) for k in refs[0]}


def outside(b, v, k):
    """How far v lies outside band b on term k, relative to its nearer end (0 inside)."""
    lo, hi = b[k]
    return 0.0 if lo <= v <= hi else (v / hi - 1 if v > hi else v / lo - 1)
