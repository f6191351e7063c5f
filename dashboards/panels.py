"""What generate.py builds its dashboards from: the PromQL helpers they share,
the dashboard variables, and Dashboard, the SDK's builder plus the panel ids,
refIds and per-kind panel defaults it leaves to us. No dashboard is defined
here; generate.py imports this module, never the reverse.
"""

import sys

try:
    from grafana_foundation_sdk.builders import (bargauge, common, dashboard, heatmap, prometheus, stat,
                                                 statetimeline, table, timeseries)
    from grafana_foundation_sdk.models import common as cm, dashboard as dm, heatmap as hm, prometheus as pm
except ImportError as e:
    sys.exit(f"generate.py: {e}; it needs grafana-foundation-sdk: run `scripts/install-deps.sh --dashboards` "
             "and then `make dashboards` (which uses the venv that installs it into)")

DS = dm.DataSourceRef(type_val="prometheus", uid="${datasource}")
SCHEMA_VERSION = 39  # Grafana 11.0, as before the SDK (whose own default, 41, is Grafana 11.6's)
RATE = "$__rate_interval"


def latency_quantile(q, by, matchers):
    """The q-quantile of iowarden_io_latency_seconds from whichever form the
    Prometheus stores: classic buckets (text scrape) or native histograms
    (protobuf scrape, --enable-feature=native-histograms)."""
    classic = (f"histogram_quantile({q}, sum by ({by}, le) "
               f"(rate(iowarden_io_latency_seconds_bucket{{{matchers}}}[{RATE}])))")
    native = (f"histogram_quantile({q}, sum by ({by}) "
              f"(rate(iowarden_io_latency_seconds{{{matchers}}}[{RATE}])))")
    return f"({classic} or {native})"


def heatmap_query(matchers):
    """Requests per second by latency bucket from whichever form the Prometheus
    stores: classic buckets by `le`, else (`or on ()`: only when there is no
    classic series at all) the native histogram, which Grafana draws as cells."""
    return (f"sum by (le) (rate(iowarden_io_latency_seconds_bucket{{{matchers}}}[{RATE}]))"
            f" or on () sum(rate(iowarden_io_latency_seconds{{{matchers}}}[{RATE}]))")


def needs(flag, title, description):
    """A panel whose data `iowarden run`'s fleet defaults (deploy/) do not
    export: the title and description say which option turns it on."""
    return f"{title} (needs {flag})", f"{description} Empty under the shipped defaults: needs iowarden run {flag}."


STAGES_FLAG = "--histogram-stages all"


def sel(*parts, **labels):
    """A PromQL label selector: positional parts verbatim, keyword labels as =~ matchers."""
    items = list(parts) + [f'{k}=~"{v}"' for k, v in labels.items()]
    return "{" + ", ".join(items) + "}"


def ds_var():
    return (dashboard.DatasourceVariable("datasource").label("Data source").type("prometheus")
            .hide(dm.VariableHide.DONT_HIDE).regex(""))


def query_var(name, label, query):
    """A multi-value label_values variable with "All" (as .*), refreshed on time range change:
    new cgroups appear."""
    return (dashboard.QueryVariable(name).label(label).datasource(DS)
            .query({"query": query, "refId": "PrometheusVariableQueryEditor-VariableQuery"})
            .hide(dm.VariableHide.DONT_HIDE).include_all(True).all_value(".*").multi(True)
            .refresh(dm.VariableRefresh.ON_TIME_RANGE_CHANGED).regex("")
            .sort(dm.VariableSort.ALPHABETICAL_ASC))


def target(expr, legend="", instant=False, fmt=None):
    t = (prometheus.Dataquery().datasource(DS).editor_mode(pm.QueryEditorMode.CODE)
         .expr(" ".join(expr.split()))  # one line, as Grafana stores it
         .legend_format(legend or "__auto"))
    t = t.instant() if instant else t.range()
    return t.format(pm.PromQueryFormat(fmt)) if fmt else t


def legend(mode, placement, calcs=None):
    opts = common.VizLegendOptions().show_legend(True).display_mode(mode).placement(placement)
    return opts.calcs(calcs) if calcs else opts


def last_value():
    return common.ReduceDataOptions().calcs(["lastNotNull"]).fields("").values(False)


def thresholds(steps):
    return (dashboard.ThresholdsConfig().mode(dm.ThresholdsMode.ABSOLUTE)
            .steps([dm.Threshold(value=v, color=c) for c, v in steps]))


class Dashboard:
    """One dashboard: the SDK's builder (which lays panels out left to right,
    wrapping at 24 columns) plus the panel ids and refIds it leaves to us."""

    def __init__(self, uid, title, description, variables, tags=()):
        self.board = (
            dashboard.Dashboard(title).uid(uid).description(description).tags(["iowarden", *tags])
            .editable().tooltip(dm.DashboardCursorSync.CROSSHAIR).version(1)
            .time("now-30m", "now").timezone("browser")
            .refresh("10s").fiscal_year_start_month(0).live_now(False).week_start("")
            .link(dashboard.DashboardLink("iowarden").type(dm.DashboardLinkType.DASHBOARDS)
                  .tags(["iowarden"]).as_dropdown(True).include_vars(True).keep_time(True)
                  .icon("external link").target_blank(False).tooltip("").url(""))
            .variables([ds_var(), *variables]))
        self.next_id = 1

    def _id(self):
        self.next_id += 1
        return self.next_id - 1

    def row(self, title):
        self.board.with_row(dashboard.Row(title).id(self._id()))

    def _add(self, panel, title, description, targets, w, h, unit=None):
        panel.id(self._id()).title(title).description(description).datasource(DS).span(w).height(h)
        if unit:
            panel.unit(unit)
        for i, t in enumerate(targets):
            panel.with_target(t.ref_id(chr(ord("A") + i)))
        self.board.with_panel(panel)

    def timeseries(self, title, description, targets, unit=None, stack=False, w=12, h=8, max_=None):
        p = (timeseries.Panel().draw_style(cm.GraphDrawStyle.LINE).line_width(1).fill_opacity(10)
             .show_points(cm.VisibilityMode.NEVER).span_nulls(False)
             .legend(legend(cm.LegendDisplayMode.TABLE, cm.LegendPlacement.RIGHT, ["mean", "max", "lastNotNull"]))
             .tooltip(common.VizTooltipOptions().mode(cm.TooltipDisplayMode.MULTI).sort(cm.SortOrder.DESCENDING)))
        if stack:
            p.stacking(common.StackingConfig().mode(cm.StackingMode.NORMAL).group("A")).fill_opacity(60)
        if max_ is not None:
            p.max(max_)
        self._add(p, title, description, targets, w, h, unit)

    def heatmap(self, title, description, target_, w=12, h=8):
        color = (heatmap.HeatmapColorOptions().mode(hm.HeatmapColorMode.SCHEME).scheme("Oranges").exponent(0.5).steps(64)
                 .fill("dark-orange").reverse(False))
        p = (heatmap.Panel().calculate(False).cell_gap(1).color(color)
             .y_axis(heatmap.YAxisConfig().axis_placement(cm.AxisPlacement.LEFT).unit("s").reverse(False))
             .rows_frame(heatmap.RowsHeatmapOptions().layout(cm.HeatmapCellLayout.AUTO))
             .cell_values(heatmap.CellValues().unit("reqps"))
             .mode(cm.TooltipDisplayMode.SINGLE).show_y_histogram().show_color_scale(True).show_legend()
             .exemplars_color("rgba(255,0,255,0.7)").filter_values(heatmap.FilterValueRange().le(1e-9))
             .hide_from(common.HideSeriesConfig().legend(False).tooltip(False).viz(False))
             .scale_distribution(common.ScaleDistributionConfig().type(cm.ScaleDistribution.LINEAR)))
        self._add(p, title, description, [target_], w, h)

    def table(self, title, description, targets, w=12, h=8, rename=None, hide=(), unit=None):
        """Instant queries as one row per series: merged on labels, without Time,
        __name__ and job (and `hide`), value columns renamed."""
        excluded = {c: True for c in ("Time", "__name__", "job", *hide)}
        p = (table.Panel().show_header(True).cell_height(cm.TableCellHeight.SM)
             .footer(common.TableFooterOptions().show(False).reducer(["sum"]).fields([]))
             .align(cm.FieldTextAlignment.AUTO).cell_options(cm.TableAutoCellOptions()).inspect(False)
             .transformations([
                 dm.DataTransformerConfig(id_val="merge", options={}),
                 dm.DataTransformerConfig(id_val="organize", options={
                     "excludeByName": excluded, "indexByName": {}, "renameByName": rename or {}})]))
        self._add(p, title, description, targets, w, h, unit)

    def stat(self, title, description, targets, unit=None, w=6, h=4, steps=None):
        p = (stat.Panel().reduce_options(last_value()).color_mode(cm.BigValueColorMode.VALUE)
             .graph_mode(cm.BigValueGraphMode.NONE).justify_mode(cm.BigValueJustifyMode.AUTO)
             .orientation(cm.VizOrientation.AUTO).text_mode(cm.BigValueTextMode.AUTO))
        if steps:
            p.thresholds(thresholds(steps))
        self._add(p, title, description, targets, w, h, unit)

    def bargauge(self, title, description, targets, unit=None, w=12, h=8, max_=None):
        p = (bargauge.Panel().reduce_options(last_value()).orientation(cm.VizOrientation.HORIZONTAL)
             .display_mode(cm.BarGaugeDisplayMode.GRADIENT).show_unfilled(True)
             .value_mode(cm.BarGaugeValueMode.COLOR).min(0))
        if max_ is not None:
            p.max(max_)
        self._add(p, title, description, targets, w, h, unit)

    def state_timeline(self, title, description, targets, w=12, h=8):
        """Met (1) or missed (0), in green and red."""
        p = (statetimeline.Panel().merge_values(True).show_value(cm.VisibilityMode.NEVER)
             .align_value(cm.TimelineValueAlignment.LEFT).row_height(0.9)
             .legend(legend(cm.LegendDisplayMode.LIST, cm.LegendPlacement.BOTTOM))
             .tooltip(common.VizTooltipOptions().mode(cm.TooltipDisplayMode.SINGLE).sort(cm.SortOrder.NONE))
             .mappings([dm.ValueMap(options={
                 "0": dm.ValueMappingResult(text="missed", color="red", index=0),
                 "1": dm.ValueMappingResult(text="met", color="green", index=1)})]))
        self._add(p, title, description, targets, w, h)

    def build(self):
        board = self.board.build()
        board.schema_version = SCHEMA_VERSION
        for p in board.panels or []:
            # The SDK wraps after a full line, not before a panel that does not fit.
            pos = p.grid_pos
            if pos and pos.x + pos.w > 24:
                sys.exit(f"{board.uid}: panel '{p.title}' at x={pos.x} w={pos.w} overflows the "
                         "24-column grid: change the widths so each line adds up to 24")
        return board
