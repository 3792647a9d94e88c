"""``GET /docs``: a self-contained HTML page generated from the server's OpenAPI schema.

FastAPI's Swagger UI loads its code from a CDN, and a server may have no internet access (or
should not make its users' browsers fetch code from elsewhere): this page has inline CSS, no
script, and no link or URL out of the server (anchors within the page only). It lists every
operation (summary, description, request body, answers, a curl example against the server's
own address) and then every schema as a table of fields.
"""

from __future__ import annotations

import html
import json
import re
from typing import Any

from xmc_core.serving.api import PREDICT_EXAMPLE
from xmc_core.serving.guard import OPEN_PATHS

_REF = "#/components/schemas/"
_STYLE = """
body{font-family:system-ui,sans-serif;max-width:62rem;margin:2rem auto;padding:0 1rem;
line-height:1.45;color:#222}h2{border-top:1px solid #ccc;padding-top:1rem}
code,pre{font-family:ui-monospace,monospace}pre{background:#f4f4f4;padding:.6rem;
overflow-x:auto}table{border-collapse:collapse}td,th{border:1px solid #ddd;padding:.2rem .5rem;
text-align:left;vertical-align:top}.m{font-weight:bold;color:#05a}
"""


def docs_page(schema: dict[str, Any], base_url: str, token: bool) -> str:
    """The page documenting the OpenAPI ``schema`` of a server reached at ``base_url``
    (``token``: whether it needs one, which the page and its curl examples say)."""
    info = schema.get("info", {})
    title = html.escape(f"{info.get('title', 'xmc')} API")
    auth = (
        "This server needs <code>Authorization: Bearer &lt;token&gt;</code> on every path but "
        f"{', '.join(f'<code>{p}</code>' for p in sorted(OPEN_PATHS))} (else 401)."
        if token
        else "This server needs no token."
    )
    parts = [
        f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{title}</title>",
        f"<style>{_STYLE}</style></head><body><h1>{title}</h1>",
        f"<p>{_text(info.get('description', ''))}</p>",
        f"<p>{auth} The OpenAPI schema: <code>GET /openapi.json</code>.</p>",
    ]
    for path, operations in schema.get("paths", {}).items():
        for method, op in operations.items():
            parts.append(_operation(path, method, op, base_url, token))
    parts.append("<h2>Schemas</h2>")
    for name, node in sorted(schema.get("components", {}).get("schemas", {}).items()):
        parts.append(f"<h3 id={html.escape(name, quote=True)}>{html.escape(name)}</h3>")
        parts.append(_object(node))
    parts.append("</body></html>")
    return "\n".join(parts)


def _operation(path: str, method: str, op: dict[str, Any], base: str, token: bool) -> str:
    out = [
        f"<h2><span class=m>{html.escape(method.upper())}</span> <code>{html.escape(path)}"
        f"</code> &mdash; {_text(op.get('summary', ''))}</h2>",
        f"<p>{_text(op.get('description', ''))}</p>",
    ]
    body = op.get("requestBody", {}).get("content", {}).get("application/json", {})
    if "schema" in body:
        out += ["<h3>Request body</h3>", _object(body["schema"])]
        for example in body["schema"].get("examples", []):
            out.append(f"<pre>{html.escape(json.dumps(example))}</pre>")
    out.append("<h3>Answers</h3><table><tr><th>status</th><th>meaning</th><th>body</th></tr>")
    for status, answer in op.get("responses", {}).items():
        shown = answer.get("content", {}).get("application/json", {}).get("schema")
        out.append(
            f"<tr><td>{html.escape(status)}</td><td>{_text(answer.get('description', ''))}</td>"
            f"<td>{_type(shown) if shown else ''}</td></tr>"
        )
    out.append("</table><h3>Example</h3>")
    out.append(f"<pre>{html.escape(_curl(method, path, base, token), quote=False)}</pre>")
    return "\n".join(out)


def _object(node: dict[str, Any]) -> str:
    """An object schema as its description and a table: field, type, required, description."""
    rows = [f"<p>{_text(node.get('description', ''))}</p>"]
    properties = node.get("properties", {})
    if not properties:
        return rows[0] + f"<p>type: {_type(node)}</p>"
    required = set(node.get("required", []))
    rows.append("<table><tr><th>field</th><th>type</th><th>required</th><th>about</th></tr>")
    for name, field in properties.items():
        rows.append(
            f"<tr><td><code>{html.escape(name)}</code></td><td>{_type(field)}</td>"
            f"<td>{'yes' if name in required else 'no'}</td>"
            f"<td>{_text(field.get('description', ''))}</td></tr>"
        )
    return "\n".join(rows) + "</table>"


def _type(node: dict[str, Any]) -> str:
    """A field's type for people: ``list of string``, ``integer (>= 1) or null``, a link to a
    schema of this page."""
    if isinstance(ref := node.get("$ref"), str) and ref.startswith(_REF):
        name = html.escape(ref.removeprefix(_REF), quote=True)
        return f'<a href="#{name}">{name}</a>'
    if "anyOf" in node:
        return " or ".join(_type(option) for option in node["anyOf"])
    if "const" in node:
        return f"<code>{html.escape(json.dumps(node['const']))}</code>"
    if "enum" in node:
        return " | ".join(f"<code>{html.escape(json.dumps(v))}</code>" for v in node["enum"])
    kind = node.get("type", "any")
    if kind == "array":
        return f"list of {_type(node.get('items', {}))}"
    bounds = [f"&gt;= {node['minimum']:g}"] if "minimum" in node else []
    bounds += [f"&gt; {node['exclusiveMinimum']:g}"] if "exclusiveMinimum" in node else []
    return html.escape(str(kind)) + (f" ({', '.join(bounds)})" if bounds else "")


def _text(text: str) -> str:
    """Escaped prose, with reST literals (````x````) as ``<code>``."""
    return re.sub(r"``(.+?)``", r"<code>\1</code>", html.escape(" ".join(text.split())))


def _curl(method: str, path: str, base: str, token: bool) -> str:
    url = base.rstrip("/") + path
    needs_token = token and path not in OPEN_PATHS
    auth = ' -H "Authorization: Bearer $XMC_SERVE_TOKEN"' if needs_token else ""
    if path == "/predict":
        body = json.dumps(PREDICT_EXAMPLE)
        return f"curl -s {url}{auth} -H 'Content-Type: application/json' -d '{body}'"
    return f"curl -s{' -X POST' if method == 'post' else ''} {url}{auth}"
