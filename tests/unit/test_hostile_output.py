"""Hostile names in every human-facing output (issue 44): a value read from a topology or a cluster (metadata.name,
tags, topic names and patterns, group names, ACL principals) must not form Markdown structure in the plan comment
or the drift issue, end a fence early, hide the DELETE caution, or send escape sequences to a terminal.

Each hostile name goes through the real code paths (a topology, memory clusters, the planner, the drift report, the
CLI) and the output is compared with the same output for a benign name: the Markdown is parsed with markdown-it-py
(CommonMark + tables + strikethrough + linkify) and with cmark-gfm (GitHub's own parser, its autolink and table
extensions), and the structure (links, images, HTML, fences, headings, table rows) must be the same; the terminal
text must hold no control character but its newlines. See docs/security.md, "Hostile names in outputs"."""

from __future__ import annotations

import html
import json
import re
from collections import Counter

import cmarkgfm
import pytest
from cmarkgfm.cmark import Options
from markdown_it import MarkdownIt

from reconciler.cli.commands_status import render_text
from reconciler.cli.main import main
from reconciler.drift.report import build_report
from reconciler.render import drift_html, drift_markdown, drift_text, graph, plan_markdown, plan_text
from reconciler.state.live import AclBinding
from reconciler.state.live import AclOperation as Op
from reconciler.state.live import AclPermission as Perm
from reconciler.textutil import md_code_span, md_fence, md_inline, term
from reconciler.topology.build import load_topology_text
from reconciler.topology.diagnostics import Diagnostic, Severity, SourceLocation
from tests.plan_helpers import World

NOW = 1_800_000_000_000
BENIGN = "benign"
HOSTILE = [
    "x\n**No changes. Plan is clean.**",
    "x\n\n**No changes. Plan is clean.**\n\n",
    "![x](http://e/x.png)",
    "[click](http://e)",
    "<img src=x>",
    "<!--",
    "-->",
    "<details>",
    "</details>",
    "x\n```\n# owned",
    "x\n~~~\n# owned",
    "````",
    "a|b|c",
    "x\n| a | b |\n|---|---|",
    "# heading",
    "x\n# heading",
    "x\n> [!NOTE]",
    "\x1b[2K\x1b[1A",
    "x\ry",
    "\u202eevil",
    "<script>alert(1)</script>",
    "<http://e>",
    "http://e.com",
    "www.e.com",
    "*em* _em_ ~~del~~ $x^2$",
    "&lt;b&gt; &#x202E;",
    "\\`code\\`",
    "x\u2028y\u2029z\x85\x9b31m\x7f\x00",
    '"quote" #quot; ]) }',
]

# --- the Markdown parsers -------------------------------------------------------------------------------------------
MD = MarkdownIt("commonmark", {"linkify": True}).enable(["table", "strikethrough", "linkify"])
#: token types that are structure: a hostile name must not add or remove any
STRUCTURE = {
    "image",
    "link_open",
    "html_block",
    "html_inline",
    "fence",
    "code_block",
    "heading_open",
    "table_open",
    "tr_open",
    "td_open",
    "th_open",
    "blockquote_open",
    "bullet_list_open",
    "ordered_list_open",
    "list_item_open",
    "strong_open",
    "em_open",
    "s_open",
    "hr",
    "code_inline",
}
#: what cmark-gfm (GitHub) makes of it, raw HTML let through (GitHub's sanitizer would keep <img>, <details>, ...)
GFM_TAGS = re.compile(
    r"<(a|img|script|details|summary|h[1-6]|pre|code|table|tr|td|th|blockquote|ul|ol|li|strong|em|del|hr|p)\b"
)
GFM_OPTIONS = Options.CMARK_OPT_UNSAFE


def _flat(tokens):
    for t in tokens:
        yield t
        if t.children:
            yield from _flat(t.children)


def structure(md: str) -> Counter:
    return Counter(t.type for t in _flat(MD.parse(md)) if t.type in STRUCTURE)


def gfm_structure(md: str) -> Counter:
    html = cmarkgfm.github_flavored_markdown_to_html(md, GFM_OPTIONS)
    return Counter(m.group(1) for m in GFM_TAGS.finditer(html)) + Counter(comments=html.count("<!--"))


def visible_text(md: str) -> str:
    """The text a reader sees: inline text and code, and the fences' content (not HTML, not link targets)."""
    out = []
    for t in MD.parse(md):
        if t.type == "inline":
            out.append("".join(c.content for c in t.children or () if c.type in ("text", "code_inline")))
        elif t.type in ("fence", "code_block"):
            out.append(t.content)
    return "\n".join(out)


def assert_same_markdown(hostile_md: str, benign_md: str, name: str, expect_text: list[str]) -> None:
    assert structure(hostile_md) == structure(benign_md), name
    assert gfm_structure(hostile_md) == gfm_structure(benign_md), name
    seen = visible_text(hostile_md)
    for words in expect_text:
        assert words in seen, (name, words)


def assert_terminal_safe(text: str) -> None:
    bad = [c for c in text if (ord(c) < 0x20 and c != "\n") or 0x7F <= ord(c) <= 0x9F]
    bad += [
        c
        for c in text
        if c in "\u061c\u200e\u200f\u2028\u2029" or "\u202a" <= c <= "\u202e" or "\u2066" <= c <= "\u2069"
    ]
    assert not bad, [hex(ord(c)) for c in bad]


# --- a world with the name everywhere a cluster or the topology can put it -------------------------------------------
def topology_text(name: str) -> str:
    return json.dumps(
        {
            "apiVersion": "reconciler/v1",
            "kind": "Topology",
            "metadata": {"name": name},
            "clusters": {
                "west": {
                    "bootstrap_servers": "127.0.0.1:1",
                    "replication_principal": "User:mirror",
                    "tags": {"region": name, name: "x"},
                },
                "east": {"bootstrap_servers": "127.0.0.1:2", "replication_principal": "User:mirror"},
            },
            "flows": [
                {
                    "source": "west",
                    "target": "east",
                    "topics": {"include": ["orders", re.escape("t" + name)]},  # a pattern with the name in it
                    "groups": {"include": [re.escape(name), "billing"]},
                }
            ],
            "prune": {"topics": True},
        }
    )


def world_of(name: str) -> World:
    w = World(load_topology_text(topology_text(name)))
    w["west"].add_topic("orders", 1)
    w["west"].add_topic("t" + name, 1)  # replicated: create topic west.t<name> on east, with its ACL
    w["west"].acls.add(AclBinding("t" + name, "User:" + name, "*", Op.READ, Perm.ALLOW))
    w["east"].add_topic("west.gone" + name, 1)  # pruned: the DELETE caution
    return w


def warning_of(name: str) -> Diagnostic:
    return Diagnostic(Severity.WARNING, f"flow {name} copies twice", SourceLocation(name + ".yaml", 3, 5), hint=name)


def plan_markdown_of(name: str) -> str:
    w = world_of(name)
    return plan_markdown.render(w.plan(), topology=w.topology, warnings=[warning_of(name)])


def report_of(name: str):
    w = world_of(name)
    topo = w.topology
    flow = topo.flows[0].name
    status = {
        "flow": flow,
        "state": "degraded",
        "heartbeat_at": NOW - 2_000,
        "spec_hash": "old",
        "records": 10,
        "lag_total": 5,
        "last_error": name,
        "groups": [{"group": name, "last_checkpoint_ms": None, "reason": "no_offset_sync", "partition": f"t{name}-0"}],
    }
    applied = {"east": {"short": name[:7], "dirty": False, "who": name, "applied_at": name, "revision": name}}
    return build_report(
        topo, w.live(), w.plan(), job_statuses={flow: status}, heartbeats={}, applied=applied, now_ms=NOW
    )


@pytest.fixture(scope="module")
def benign_plan_md() -> str:
    return plan_markdown_of(BENIGN)


@pytest.fixture(scope="module")
def benign_drift_md() -> str:
    return drift_markdown.render(report_of(BENIGN))


# --- the helpers themselves ------------------------------------------------------------------------------------------
def test_term_shows_every_control():
    assert term("a\x1b[2K\nb\r\t\x7f\x9b\u202e\u2028") == "a\\x1b[2K\\x0ab\\x0d\\x09\\x7f\\x9b\\u202e\\u2028"
    assert term("a\nb\x1b", newlines=True) == "a\nb\\x1b"
    assert term("orders\\..*") == "orders\\..*"  # a pattern stays readable


def test_md_helpers():
    assert md_inline("![x](http://e)") == "\\!\\[x\\]\\(http\\://e\\)"
    assert md_inline("a\nb") == "a\\\\x0ab"  # shown as a\x0ab
    assert md_code_span("a``b") == "```a``b```" and md_code_span("`x") == "`` `x ``"
    assert md_code_span("a|b", in_table=True) == "`a\\|b`"
    assert md_fence("x\n```\ny", "diff") == "````diff\nx\n```\ny\n````"


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_name_in_each_markdown_helper(name):
    def doc(value: str) -> str:
        return (
            f"before {md_inline(value)} and {md_code_span(value)} after\n\n"
            f"| a | b |\n|---|---|\n| {md_inline(value)} | {md_code_span(value, in_table=True)} |\n\n"
            f"{md_fence(value, 'diff')}\n\nthe end\n"
        )

    assert_same_markdown(doc(name), doc(BENIGN), name, [term(name), term(name, newlines=True), "the end"])


# --- the plan comment ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", HOSTILE)
def test_plan_markdown(name, benign_plan_md):
    md = plan_markdown_of(name)
    assert_same_markdown(
        md,
        benign_plan_md,
        name,
        [
            term(name),  # the title's code span
            f"west.t{term(name)}",  # the remote topic in the ```diff block
            f"User:{term(name)}",  # the principal of its ACL
            f"DELETE topic west.gone{term(name)}",
            "This plan DELETES 1 thing",  # the caution, seen (not in an HTML comment)
        ],
    )
    assert "This plan DELETES 1 thing" in quoted_text(md)  # still the CAUTION alert's words


def quoted_text(md: str) -> str:
    """The text inside block quotes (GitHub's alerts)."""
    depth, out = 0, []
    for t in MD.parse(md):
        depth += {"blockquote_open": 1, "blockquote_close": -1}.get(t.type, 0)
        if depth and t.type == "inline":
            out.append("".join(c.content for c in t.children or () if c.type in ("text", "code_inline")))
    return "\n".join(out)


@pytest.mark.parametrize("name", HOSTILE)
def test_plan_text(name):
    w = world_of(name)
    text = plan_text.render(w.plan()) + plan_text.summary(w.plan())
    assert_terminal_safe(text)
    assert f"west.t{term(name)}" in text and f"for topology {term(name)}:" in text


@pytest.mark.parametrize("name", ['a"]\n  evil["x', 'x"| evil |"y', "```\nflowchart", "#quot;<b>&amp;`md`"])
def test_mermaid_labels_stay_in_their_quotes(name):
    chart = graph.mermaid(world_of(name).topology)
    lines = chart.splitlines()
    assert len(lines) == 4 and lines[0] == "flowchart LR", chart  # the header, two clusters, one flow: no new line
    for line in lines[1:]:
        assert line.count('"') == 2, line  # one quoted label each, nothing closes it early
        assert not re.search(
            r"[<>&`|]|#(?!quot;|35;|lt;|gt;|amp;|96;|124;)", line.split('"')[1].replace("<br/>", "")
        ), line


# --- the drift report ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", HOSTILE)
def test_drift_markdown(name, benign_drift_md):
    md = drift_markdown.render(report_of(name))
    assert_same_markdown(md, benign_drift_md, name, [term(name), f"group {term(name)}"])


@pytest.mark.parametrize("name", HOSTILE)
def test_drift_text(name):
    text = drift_text.render(report_of(name))
    assert_terminal_safe(text)
    assert f"group {term(name)}" in text


def test_html_report_escapes_once():
    """The HTML report keeps its own escaping (html.escape), not the Markdown or terminal rule."""
    name = '<img src=x>&"y"'
    page = drift_html.render(report_of(name), world_of(name).topology)
    assert html.escape(name) in page and "<img src=x>" not in page and "\\<img" not in page


@pytest.mark.parametrize("name", HOSTILE)
def test_status_text(name):
    row = {
        "flow": "west->east",
        "wanted": True,
        "deployer": "local",
        "where": name,
        "state": "stopped",
        "job_state": name,
        "why": name,
        "desired_hash": "a" * 12,
        "deployed_hash": "a" * 12,
        "running_hash": None,
        "in_sync": False,
        "lag_total": None,
        "lag_seconds": None,
        "latency_ms": None,
        "records_per_second": None,
        "records": None,
        "errors": None,
        "last_error": name,
        "heartbeat_at": None,
        "last_seen": None,
        "unreadable": None,
        "groups": [{"group": name, "reason": "no_offset_sync", "partition": name, "last_checkpoint_ms": None}],
    }
    text = render_text([row], 0)
    assert_terminal_safe(text)
    assert f"west->east: {term(name)}" in text and f"group {term(name)}" in text


# --- the CLI: plan's outputs, apply's question and output ------------------------------------------------------------
@pytest.mark.parametrize("name", HOSTILE)
def test_cli_plan_and_apply(name, tmp_path, capsys):
    path = tmp_path / "t.yaml"
    path.write_text(topology_text(name))
    w = world_of(name)
    asked: list[str] = []
    for fmt in ("text", "markdown"):
        main(["plan", str(path), "--format", fmt], w.backend())
    main(["apply", str(path)], w.backend(ask=lambda q: asked.append(q) or "no"))
    out, err = capsys.readouterr()
    for text in (out, err, *asked):
        assert_terminal_safe(text)
    assert asked and "Apply cancelled." in err and f"west.t{term(name)}" in out


# --- what GitHub still links: an e-mail address in prose -------------------------------------------------------------
def test_email_addresses_are_linked_by_github_only_outside_code():
    """cmark-gfm links `a@b.com` whatever its escaping (it reads the text after unescaping); a `mailto:` link is
    the one link a name can make in prose (no image, no http link). In code spans (cluster aliases, topics, titles)
    nothing is linked. docs/security.md says so."""
    prose = cmarkgfm.github_flavored_markdown_to_html(md_inline("User:a@b.com"), GFM_OPTIONS)
    assert '<a href="mailto:a@b.com">' in prose and "http" not in prose
    code = cmarkgfm.github_flavored_markdown_to_html(md_code_span("User:a@b.com"), GFM_OPTIONS)
    assert "<a " not in code


# --- the policy section (issue 48): a Rego message, an object, a rule name and a file name from outside -----------------
def _policy_record(name: str):
    from reconciler.plan.policy_record import Approval, PolicyFinding, PolicyRecord
    from reconciler.plan.risk import Risk

    finding = PolicyFinding(f"policies/{name}.rego", None, name, f"deny {name}", "east", f"topic {name}")
    needs = PolicyFinding(f"policies/{name}.yaml", 3, name, f"approve {name}", "east", f"topic {name}", Risk.DELETE)
    return PolicyRecord(((f"policies/{name}.rego", "0" * 64),), (finding,), (finding,), (needs,), Approval(name, "t"))


@pytest.mark.parametrize("name", HOSTILE)
def test_the_policy_section_escapes_what_policies_say(name):
    from reconciler.render import policy as policy_render

    hostile, benign = _policy_record(name), _policy_record(BENIGN)
    assert_same_markdown(policy_render.markdown(hostile), policy_render.markdown(benign), name, ["deny", "approve"])
    assert_terminal_safe(policy_render.text(hostile))
    assert_terminal_safe("\n".join(policy_render.refusal(hostile)))
