"""Which pictures a report draws: one per distinct graph structure, its first graph and its last one when that
is another graph whose records were kept. Shared by ``gradviz run`` (files) and ``report.html``, so file names,
page headings and the summary's "structure N" all agree.

A long run can have hundreds of structures (REINFORCE: one per episode length), so ``choose_pictures`` draws at
most ``MAX_PICTURES`` of them, those that matter: the first graph of the run, the graphs diagnostics point at,
then the largest; the others are listed, not drawn.
"""

from dataclasses import dataclass

MAX_PICTURES = 12  # pictures ``gradviz run`` draws by default (``--max-pictures``)


@dataclass
class Picture:
    graph: int
    structure: int
    iteration: int
    count: int  # how many graphs share the structure
    which: str = ""  # "first", "last" or "" (the only one)
    stem: str = ""  # file name without suffix: structure-<structure>-iter<iteration>, as the summary numbers them
    nodes: int = 0  # the graph's size (listed and elided nodes): the largest are drawn first under the cap
    why: str = ""  # why it is drawn under the cap: "first", "diagnosed" or "largest"

    @property
    def about(self):
        """What the picture shows, in the summary's words: ``structure 0, iteration 99 (last of 100)``."""
        seen = f" ({self.which} of {self.count})" if self.which else ""
        return f"structure {self.structure}, iteration {self.iteration}{seen}"

    @property
    def title(self):
        return f"{self.about} · graph {self.graph}"


def pictures_to_draw(doc):
    """One picture per distinct graph structure: its first graph, and its last one when that is another graph
    whose nodes were kept."""
    graphs = {g["id"]: g for g in doc.get("graphs", [])}
    pictures = []
    for structure in doc.get("structures", []):
        sid = structure["id"]
        chosen = [structure["first_graph"]]
        last = structure.get("last_graph")
        if last is not None and last != structure["first_graph"] and graphs.get(last, {}).get("full", True):
            chosen.append(last)
        count = structure.get("count", 1)
        for gid in chosen:
            graph = graphs.get(gid)
            if graph is None or not graph.get("full", True) or not graph.get("nodes"):
                continue
            iteration = graph.get("iteration", 0)
            which = "" if count <= 1 else "first" if gid == structure["first_graph"] else "last"
            size = len(graph["nodes"]) + ((graph.get("elided") or {}).get("nodes") or 0)
            pictures.append(Picture(gid, sid, iteration, count, which, nodes=size))
    stems = set()
    for picture in pictures:
        stem = f"structure-{picture.structure}-iter{picture.iteration}"
        picture.stem = stem if stem not in stems else f"{stem}-graph{picture.graph}"
        stems.add(picture.stem)
    return pictures


def choose_pictures(doc, limit=MAX_PICTURES):
    """``(drawn, listed)``: at most ``limit`` of ``pictures_to_draw(doc)`` (``None``: all), chosen in this order:
    the run's first graph, the graphs a diagnostic points at (in the diagnostics' order), then the largest (most
    nodes; the earlier on ties). Both lists keep ``pictures_to_draw``'s order; each drawn one says ``why``."""
    pictures = pictures_to_draw(doc)
    if limit is None or len(pictures) <= limit:
        for picture in pictures:
            picture.why = "all"
        return pictures, []
    by_graph = {picture.graph: picture for picture in pictures}
    chosen = {}

    def take(picture, why):
        if picture is not None and picture.graph not in chosen and len(chosen) < limit:
            picture.why = why
            chosen[picture.graph] = picture

    if pictures:
        take(min(pictures, key=lambda p: (p.iteration, p.graph)), "first")
    structure_of = {g["id"]: g.get("structure") for g in doc.get("graphs", [])}
    by_structure = {}
    for picture in pictures:
        by_structure.setdefault(picture.structure, picture)
    for gid in diagnosed_graphs(doc):  # a graph not drawn itself (the middle of a loop): its structure's first
        take(by_graph.get(gid) or by_structure.get(structure_of.get(gid)), "diagnosed")
    for picture in sorted(pictures, key=lambda p: (-p.nodes, p.graph)):
        take(picture, "largest")
    drawn = [p for p in pictures if p.graph in chosen]
    return drawn, [p for p in pictures if p.graph not in chosen]


def diagnosed_graphs(doc):
    """Graph ids the diagnostics point at (through their nodes and variables), in the diagnostics' order."""
    node_graph = {n["id"]: n.get("graph") for n in doc.get("nodes", [])}
    variable_graph = {v["id"]: v.get("graph") for v in doc.get("variables", [])}
    found = []
    for diag in doc.get("diagnostics", []):
        for gid in [node_graph.get(n) for n in diag.get("nodes") or ()] + \
                   [variable_graph.get(v) for v in diag.get("variables") or ()]:
            if gid is not None and gid not in found:
                found.append(gid)
    return found
