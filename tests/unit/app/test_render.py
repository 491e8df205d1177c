"""Pictures of a lineage neighbourhood: dot and SVG from a known graph, hostile names escaped."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from kafka_lineage.app.render import to_dot, to_html, to_svg
from kafka_lineage.graph.queries import Reached, Traversal

HOSTILE = '<script>alert("x")</script> & "quotes"'
GRAPH = Traversal(
    start=Reached(0, "dataset", "s3://lake", "orders"),
    nodes=[Reached(1, "job", "etl", "daily"), Reached(1, "dataset", "s3://lake", HOSTILE),
           Reached(2, "job", "etl", "report")],
    edges=[(("dataset", "s3://lake", "orders"), ("job", "etl", "daily")),
           (("job", "etl", "daily"), ("dataset", "s3://lake", HOSTILE)),
           (("dataset", "s3://lake", HOSTILE), ("job", "etl", "report"))],
)


def test_dot_has_every_node_and_edge_quoted() -> None:
    dot = to_dot(GRAPH)
    assert dot.startswith("digraph lineage {") and dot.count("->") == 3
    assert dot.count("shape=box") == 2 and dot.count("shape=ellipse") == 2
    assert '\\"quotes\\"' in dot  # labels are JSON-quoted, so a name cannot break out of its string


def test_svg_is_well_formed_laid_out_by_distance_and_escaped() -> None:
    svg = to_svg(GRAPH)
    root = ET.fromstring(svg)  # parses: nothing unescaped
    titles = [t.text for t in root.iter("{http://www.w3.org/2000/svg}title")]
    assert len(titles) == 4 and any(HOSTILE in title for title in titles)
    xs = {title.split(": ")[1]: float(group.find("{http://www.w3.org/2000/svg}rect").get("x"))
          for group in root.iter("{http://www.w3.org/2000/svg}g")
          for title in [group.find("{http://www.w3.org/2000/svg}title").text]}
    assert xs["s3://lake orders"] < xs["etl daily"] < xs[f"s3://lake {HOSTILE}"] < xs["etl report"]
    assert len(list(root.iter("{http://www.w3.org/2000/svg}line"))) == 3
    assert "<script>" not in to_html(GRAPH, "impact")
