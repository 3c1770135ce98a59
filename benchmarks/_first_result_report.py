"""The targets of ``benchmarks.first_result`` and what its report says about them: which target each mode met
(:func:`verdict`) and the Markdown table written beside the JSON (:func:`markdown`).

A helper module of that benchmark (no ``main``).
"""

from __future__ import annotations

# warm: seconds to a tab's first result with a filled cache; cold: with an empty one; RSS of the app's process tree
TARGETS = {"warm_s": 3.0, "cold_s": 60.0, "rss_mb": 1200.0}


def verdict(mode: dict) -> dict:
    """Each target for one mode: met, or not (None where it was not measured)."""
    limit = TARGETS["warm_s"] if mode["mode"] == "warm" else TARGETS["cold_s"]
    tabs = mode.get("tabs", {})
    out = {slug: tab["seconds"] is not None and tab["seconds"] <= limit for slug, tab in tabs.items()}
    if mode["mode"] == "cold":
        out |= {f"{slug}_progress": tab["progress"]["throughout"] for slug, tab in tabs.items() if "progress" in tab}
    rss = mode.get("rss_after_pass", {}).get("rss_mb")
    out["rss"] = None if rss is None else rss <= TARGETS["rss_mb"]
    return out


def markdown(report: dict) -> str:
    """The report's Markdown: the machine and targets, then per mode one row per tab."""
    lines = [
        f"# First result per tab ({report['backend']})",
        "",
        f"`{report['command']}` on {report['machine']['cpu']} ({report['machine']['cpus']} CPUs; ISA "
        f"{', '.join(report['machine']['isa'])}); load average {report['machine']['load_average']:.1f} at start, "
        f"{report['load_average_end']:.1f} at the end. Targets: warm <= {TARGETS['warm_s']:.0f} s, cold <= "
        f"{TARGETS['cold_s']:.0f} s with progress shown throughout, RSS after the pass <= "
        f"{TARGETS['rss_mb']:.0f} MB.",
        "",
    ]
    for mode in report["modes"]:
        if "error" in mode:
            lines += [f"**{mode['mode']}**: {mode['error']}", ""]
            continue
        warm = f"; `mlse warm` took {mode['warm']['seconds']} s" if "warm" in mode else ""
        rss = mode.get("rss_after_pass", {})
        lines += [
            f"**{mode['mode']}**: page served in {mode['page_served_s']} s, drawn in {mode['page_drawn_s']} s"
            f"{warm}; RSS after the pass {rss.get('rss_mb')} MB ({rss.get('processes')} processes).",
            "",
            "| tab | first result (s) | tab drawn (s) | progress shown | longest gap (s) | target met |",
            "|---|---:|---:|---:|---:|:---:|",
        ]
        met = verdict(mode)
        for slug, tab in mode.get("tabs", {}).items():
            progress = tab.get("progress") or {}
            shown = "-" if progress.get("visible_share") is None else f"{progress['visible_share']:.0%}"
            ok = met[slug] and met.get(f"{slug}_progress", True)
            lines.append(
                f"| {tab['tab']} | {tab['seconds'] if tab['seconds'] is not None else tab.get('error')} | "
                f"{tab['tab_open_s']} | {shown} | {progress.get('longest_gap_s', '-')} | "
                f"{'yes' if ok else 'no'} |"
            )
        for tab in mode.get("tabs", {}).values():  # a tab that draws its cached result when opened (the map)
            if "drawn_on_open_s" in tab:
                when = tab["drawn_on_open_s"]
                lines += [
                    "",
                    f"{tab['tab']}: drawn on opening, before any press, {when} s after the tab was clicked."
                    if when is not None
                    else f"{tab['tab']}: not drawn on opening (nothing cached for it); the press above drew it.",
                ]
        lines.append("")
    return "\n".join(lines)
