import { describe, expect, it } from "vitest";
import { type Box, type Link, layered } from "../src/layout";
import { middle, shortName, shortNamespace } from "../src/names";

const box = (id: string, height = 30): Box => ({ id, width: 100, height });

function overlapping(boxes: Box[], at: Map<string, { x: number; y: number }>): [string, string][] {
  const found: [string, string][] = [];
  const sorted = [...boxes].sort((a, b) => at.get(a.id)!.x - at.get(b.id)!.x || at.get(a.id)!.y - at.get(b.id)!.y);
  for (let i = 0; i < sorted.length; i++) {
    for (let j = i + 1; j < sorted.length; j++) {
      const a = at.get(sorted[i].id)!, b = at.get(sorted[j].id)!;
      if (b.x - a.x >= (sorted[i].width + sorted[j].width) / 2) break;
      if (Math.abs(a.y - b.y) < (sorted[i].height + sorted[j].height) / 2) found.push([sorted[i].id, sorted[j].id]);
    }
  }
  return found;
}

// A layered DAG like the bench's: `layers` layers of `width` nodes, each reading 2-3 of the layer before.
function dag(layers: number, width: number): { boxes: Box[]; links: Link[] } {
  const boxes: Box[] = [], links: Link[] = [];
  for (let layer = 0; layer < layers; layer++) {
    for (let slot = 0; slot < width; slot++) {
      boxes.push(box(`${layer}-${slot}`));
      if (layer) for (const k of [0, 7, 13].slice(0, 2 + (slot % 2))) links.push({ source: `${layer - 1}-${(slot * 31 + k) % width}`, target: `${layer}-${slot}` });
    }
  }
  return { boxes, links };
}

describe("layered", () => {
  it("places every node, data flowing left to right, without overlaps", () => {
    const { boxes, links } = dag(8, 40);
    const at = layered(boxes, links);
    expect(at.size).toBe(boxes.length);
    for (const link of links) expect(at.get(link.target)!.x).toBeGreaterThan(at.get(link.source)!.x);
    expect(overlapping(boxes, at)).toEqual([]);
  });

  it("turns a cycle's closing edge around instead of looping (a job reading and writing one table)", () => {
    const boxes = ["table", "job", "other"].map((id) => box(id));
    const links = [{ source: "table", target: "job" }, { source: "job", target: "table" }, { source: "job", target: "other" }];
    const at = layered(boxes, links);
    expect(at.get("job")!.x).toBeGreaterThan(at.get("table")!.x);
    expect(at.get("other")!.x).toBeGreaterThan(at.get("job")!.x);
  });

  it("pulls a source next to its reader rather than into the first layer", () => {
    const boxes = ["a", "b", "c", "late"].map((id) => box(id));
    const links = [{ source: "a", target: "b" }, { source: "b", target: "c" }, { source: "late", target: "c" }];
    const at = layered(boxes, links);
    expect(at.get("late")!.x).toBe(at.get("b")!.x);
  });

  it("keeps crossing edges few on two chains drawn side by side", () => {
    const boxes = ["a1", "b1", "a2", "b2", "a3", "b3"].map((id) => box(id));
    const links = [{ source: "a1", target: "a2" }, { source: "a2", target: "a3" }, { source: "b1", target: "b2" }, { source: "b2", target: "b3" }];
    const at = layered(boxes, links);
    const above = (x: string, y: string) => at.get(x)!.y < at.get(y)!.y;
    expect(above("a1", "b1")).toBe(above("a2", "b2"));
    expect(above("a2", "b2")).toBe(above("a3", "b3"));
  });

  it("ignores links to nodes it was not given and duplicate links", () => {
    const at = layered([box("a"), box("b")], [{ source: "a", target: "b" }, { source: "a", target: "b" }, { source: "a", target: "gone" }]);
    expect([...at.keys()].sort()).toEqual(["a", "b"]);
  });

  it("lays out a 2,500-node answer", () => {
    const { boxes, links } = dag(20, 125);
    const started = performance.now();
    const at = layered(boxes, links);
    console.log(`layered: ${boxes.length} nodes, ${links.length} links in ${(performance.now() - started).toFixed(0)} ms`);
    expect(at.size).toBe(2500);
    expect(overlapping(boxes, at)).toEqual([]);
  });
});

describe("names", () => {
  it("shortens by how integrations name things", () => {
    expect(shortName("dataset", "/warehouse/orders/orders_cleaned")).toBe("…/orders_cleaned");
    expect(shortName("dataset", "lake/events/dt=2024-01-01/")).toBe("…/events");
    expect(shortName("dataset", "shop.public.orders")).toBe("public.orders");
    expect(shortName("dataset", "orders")).toBe("orders");
    expect(shortName("job", "orders_pipeline.adaptive_spark_plan.warehouse_orders_cleaned"))
      .toBe("…warehouse_orders_cleaned");
    expect(shortName("job", "orders_pipeline.adaptive_spark_plan.write")).toBe("orders_pipeline…write");
    expect(shortName("job", "etl.load")).toBe("etl.load");
  });

  it("cuts the middle of what is still too long, keeping the end", () => {
    const cut = middle("a_very_long_table_name_that_goes_on_and_on_orders", 20);
    expect(cut.length).toBe(20);
    expect(cut.endsWith("on_orders")).toBe(true);
    expect(shortNamespace("postgres://db.prod.internal:5432")).toBe("db.prod.internal:5432");
  });
});
