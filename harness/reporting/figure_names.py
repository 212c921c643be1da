"""The names of the files a report writes (the standard figures' stems, the page and its tables), in a
module of their own (no plotting imports), so that the run directory can name the files a redraw
may replace or remove without loading matplotlib."""

REPORT = "report.md"
CONTRASTS = "contrasts.parquet"  # figure 0's numbers (harness.analysis.forest)
CEILING = "ceiling.parquet"  # figure 9's, where a direct placement is read beside injected ones
REPORT_FILES = (REPORT, CONTRASTS, CEILING)  # what write_outputs writes beside figures/

# every figure the standard set (harness.reporting.figure_set) can draw
FIGURE_NAMES = ("fig0_c_minus_b", "fig1_edit_distance", "fig2_layer_drift", "fig3_heads_C", "fig4_prefix_mass",
                "fig5_isolation", "fig6_survival", "fig7_output_kl_steps", "fig8_hit_rate", "fig9_ceiling")
