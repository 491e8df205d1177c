import { describe, expect, it } from "vitest";
import { cells, partitionGrid, worst } from "../src/partitions";
import { lanes, seconds, timeline } from "../src/runs";
import { diffRows, flatten } from "../src/schema";

describe("runs over time", () => {
  const run = (id: string, start: string, end: string | null, state = "COMPLETE") =>
    ({ runId: id, state, startTime: start, endTime: end, durationMs: end ? Date.parse(end) - Date.parse(start) : null });

  it("puts overlapping runs in lanes of their own and reuses a lane once it is free", () => {
    const bars = lanes([run("b", "2026-01-01T01:30:00Z", "2026-01-01T03:00:00Z"), run("a", "2026-01-01T01:00:00Z", "2026-01-01T02:00:00Z"),
      run("c", "2026-01-01T02:30:00Z", "2026-01-01T02:45:00Z")], Date.parse("2026-01-02T00:00:00Z"));
    expect(bars.map((b) => [b.run.runId, b.lane])).toEqual([["a", 0], ["b", 1], ["c", 0]]);
  });

  it("draws a run still going up to now, and one bar per run with its state's colour", () => {
    const now = Date.parse("2026-01-01T05:00:00Z");
    const bars = lanes([run("r", "2026-01-01T01:00:00Z", null, "RUNNING")], now);
    expect(bars[0].to).toBe(now);
    const svg = timeline([run("a", "2026-01-01T01:00:00Z", "2026-01-01T02:00:00Z"), run("f", "2026-01-01T03:00:00Z", "2026-01-01T03:10:00Z", "FAIL")], now);
    expect(svg.match(/class="run-bar"/g)?.length).toBe(2);
    expect(svg).toContain("#c2410c");
    expect(svg).toContain("2 runs, 1 failed");
    expect(seconds(90_000)).toBe("90.0 s");
    expect(seconds(3 * 3_600_000)).toBe("3.0 h");
  });
});

describe("partitions", () => {
  it("lays dated keys out as a calendar, a day coloured by its worst partition", () => {
    const grid = cells([{ key: "date=2026-06-01/region=eu", state: "SUCCESS" }, { key: "date=2026-06-01/region=us", state: "FAILED" },
      { key: "date=2026-06-02/region=eu", state: "SUCCESS" }, { key: "date=2026-06-08/region=eu", state: null }]);
    // 2026-06-01 is a Monday: row 0 of the first week; the 8th starts the next column
    expect(grid.map((c) => [c.label, c.state, c.column, c.row])).toEqual([
      ["2026-06-01", "FAILED", 0, 0], ["2026-06-02", "SUCCESS", 0, 1], ["2026-06-08", "NONE", 1, 0]]);
    expect(worst(["SUCCESS", "STALE", "RUNNING"])).toBe("STALE");
  });

  it("lays other keys out in key order and counts each state", () => {
    const grid = cells([{ key: "shard=b", state: "SUCCESS" }, { key: "shard=a", state: "RUNNING" }], 1);
    expect(grid.map((c) => [c.label, c.row])).toEqual([["shard=a", 0], ["shard=b", 1]]);
    expect(partitionGrid([{ key: "shard=a", state: "FAILED" }, { key: "shard=b", state: "FAILED" }])).toContain("2 failed");
  });
});

describe("schema diff", () => {
  it("names every field of either version with what happened to it, nested fields by path", () => {
    const before = [{ name: "id", type: "bigint" }, { name: "amount", type: "int" }, { name: "gone", type: "string" },
      { name: "address", type: "struct", fields: [{ name: "city", type: "string" }] }];
    const after = [{ name: "id", type: "bigint" }, { name: "amount", type: "decimal(18,2)" }, { name: "currency", type: "string" },
      { name: "address", type: "struct", fields: [{ name: "city", type: "string" }, { name: "zip", type: "string" }] }];
    expect(flatten(after).get("address.zip")).toBe("string");
    expect(diffRows(before, after).map((r) => [r.path, r.change])).toEqual([
      ["id", "same"], ["amount", "changed"], ["currency", "added"], ["address", "same"], ["address.city", "same"],
      ["address.zip", "added"], ["gone", "removed"]]);
  });
});

describe("home", () => {
  it("draws every day of the window, days without runs too, and nothing outside it", async () => {
    const { runsChart } = await import("../src/home");
    const svg = runsChart([{ day: "2026-03-10", states: { COMPLETE: 4, FAIL: 1 } }, { day: "2099-01-01", states: { COMPLETE: 9 } }],
      14, new Date("2026-03-10T12:00:00Z"));
    expect(svg.match(/<rect /g)?.length).toBe(2); // the 10th's two states; 2099 is not in the window
    expect(svg).toContain("2026-02-25 to 2026-03-10; most 5 runs a day");
  });
});
