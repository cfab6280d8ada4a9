"""Which pictures a report draws: one per distinct graph structure, its first graph and its last one when that
is another graph whose records were kept. Shared by ``gradviz run`` (files) and ``report.html``, so file names,
page headings and the summary's "structure N" all agree.
"""

from dataclasses import dataclass


@dataclass
class Picture:
    graph: int
    structure: int
    iteration: int
    count: int  # how many graphs share the structure
    which: str = ""  # "first", "last" or "" (the only one)
    stem: str = ""  # file name without suffix: structure-<structure>-iter<iteration>, as the summary numbers them

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
            pictures.append(Picture(gid, sid, iteration, count, which))
    stems = set()
    for picture in pictures:
        stem = f"structure-{picture.structure}-iter{picture.iteration}"
        picture.stem = stem if stem not in stems else f"{stem}-graph{picture.graph}"
        stems.add(picture.stem)
    return pictures
