"""A trace document's diagnostics as SARIF 2.1.0, the findings format code scanning and editors' SARIF viewers read.

One result per diagnostic: the code is the rule id, the severity the level (``info`` is SARIF's ``note``), the
message (with the hint after it), the file and line, and the ``related`` locations with their roles. The rules
carry the diagnostics catalogue's metadata (title, default level, the long explanation as help). Like the other
renderers this reads documents only: nothing here imports tracing.

Paths: a file under ``base`` (the working folder by default, where ``gradviz run`` ran) is written relative to
the ``SRCROOT`` base id, as code scanning wants repository-relative paths; any other file as a ``file:`` URI.
"""

import hashlib
import json
import os
import pathlib
from urllib.parse import quote

from .._version import __version__

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
_LEVELS = {"error": "error", "warning": "warning", "info": "note"}
_BASE_ID = "SRCROOT"


def to_sarif(doc, base=None, catalogue=()):
    """The SARIF 2.1.0 log (a dict, ready for ``json.dump``) of trace document ``doc``'s diagnostics.
    ``base``: the folder paths are made relative to (default: the working folder). ``catalogue``: the rules'
    metadata, ``[(code, severity, title, explanation)]`` (``gradviz.to_sarif`` gives the diagnostics catalogue;
    rendering reads documents only and does not import it)."""
    from . import as_document

    doc = as_document(doc)
    base = os.path.abspath(base or os.getcwd())
    rules, index = _rules(doc, catalogue)
    results = [_result(d, index, base) for d in doc.get("diagnostics", [])]
    run = {
        "tool": {"driver": {"name": "gradviz", "version": __version__, "semanticVersion": _semantic(__version__),
                            "rules": rules}},
        "originalUriBaseIds": {_BASE_ID: {"uri": pathlib.Path(base).as_uri() + "/"}},
        "results": results,
    }
    if doc.get("script"):
        run["properties"] = {"script": str(doc["script"])}
    return {"$schema": SARIF_SCHEMA, "version": SARIF_VERSION, "runs": [run]}


def write_sarif(doc, path, base=None, catalogue=()):
    """Write ``to_sarif(doc, base, catalogue)`` to ``path`` (UTF-8 JSON)."""
    from ..atomic import write_text

    write_text(path, json.dumps(to_sarif(doc, base, catalogue), indent=1, ensure_ascii=False) + "\n")


def _rules(doc, catalogue):
    """Every code of the catalogue as a rule, then any code the document has that the catalogue lacks (a
    document from a newer gradviz); ``index`` maps a code to its rule's position."""
    rules = []
    known = set()
    for code, severity, title, explanation in catalogue:
        known.add(code)
        help_text = f"{code} ({severity}): {title}\n\n{explanation}"
        rules.append({"id": code, "name": _rule_name(code), "shortDescription": {"text": title},
                      "fullDescription": {"text": _first_paragraph(help_text) or title},
                      "help": {"text": help_text},
                      "defaultConfiguration": {"level": _LEVELS.get(severity, "warning")},
                      "properties": {"tags": ["autograd", "gradviz"], "severity": severity}})
    for d in doc.get("diagnostics", []):
        if d["code"] not in known:
            known.add(d["code"])
            rules.append({"id": d["code"], "shortDescription": {"text": d["code"]},
                          "defaultConfiguration": {"level": _LEVELS.get(d.get("severity"), "warning")}})
    return rules, {rule["id"]: number for number, rule in enumerate(rules)}


def _result(d, index, base):
    message = d["message"]
    if d.get("hint"):
        message = f"{message}\n\n{d['hint']}"
    result = {"ruleId": d["code"], "ruleIndex": index[d["code"]], "level": _LEVELS.get(d.get("severity"), "warning"),
              "message": {"text": message}}
    location = _location(d.get("location"), base)
    if location is not None:
        result["locations"] = [location]
        result["partialFingerprints"] = {"gradvizFinding/v1": _fingerprint(d)}
    related = []
    for number, item in enumerate(d.get("related") or []):
        place = _location(item.get("location"), base)
        if place is not None:
            place["id"] = number
            place["message"] = {"text": str(item.get("role") or "related")}
            related.append(place)
    if related:
        result["relatedLocations"] = related
    properties = {"severity": d.get("severity")}
    if d.get("count", 1) > 1:
        properties["count"] = d["count"]
    result["properties"] = properties
    return result


def _location(loc, base):
    """A SARIF location for a document Location (None when it has no file or line)."""
    if not loc or not loc.get("file") or not isinstance(loc.get("line"), int) or loc["line"] < 1:
        return None
    if str(loc["file"]).startswith("<"):  # `<string>`, `<stdin>`: code with no file to point at
        return None
    region = {"startLine": loc["line"]}
    if loc.get("text"):
        region["snippet"] = {"text": loc["text"]}
    place = {"physicalLocation": {"artifactLocation": _artifact(loc["file"], base), "region": region}}
    if loc.get("function"):
        place["logicalLocations"] = [{"name": loc["function"], "kind": "function"}]
    return place


def _artifact(file, base):
    path = os.path.abspath(os.path.join(base, file))
    relative = os.path.relpath(path, base) if _under(path, base) else None
    if relative is not None:
        return {"uri": quote(pathlib.PurePath(relative).as_posix()), "uriBaseId": _BASE_ID}
    return {"uri": pathlib.Path(path).as_uri()}


def _under(path, base):
    try:
        return os.path.commonpath([path, base]) == base
    except ValueError:  # another drive
        return False


def _fingerprint(d):
    """Stable across runs and line shifts: the code, the file's name and the line's text."""
    loc = d["location"]
    key = "\0".join([d["code"], os.path.basename(str(loc["file"])), str(loc.get("text") or loc["line"])])
    return hashlib.sha256(key.encode("utf-8", "backslashreplace")).hexdigest()[:32]


def _rule_name(code):
    return "".join(part.capitalize() for part in code.replace("_", "-").split("-"))


def _first_paragraph(text):
    parts = text.split("\n\n", 2)
    return parts[1].strip() if len(parts) > 1 else ""


def _semantic(version):
    """SARIF's semanticVersion wants major.minor.patch: gradviz's own when it is one, else the first three parts."""
    parts = version.split("+")[0].split(".")
    return ".".join((parts + ["0", "0"])[:3])
