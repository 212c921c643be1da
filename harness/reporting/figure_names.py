"""The standard figures' file stems, in a module of their own (no plotting imports), so that the
run directory can name the files a redraw may replace or remove without loading matplotlib."""

# every figure the standard set (harness.reporting.figure_set) can draw
FIGURE_NAMES = ("fig0_c_minus_b", "fig1_edit_distance", "fig2_layer_drift", "fig3_heads_C", "fig4_prefix_mass",
                "fig5_isolation", "fig6_survival", "fig7_output_kl_steps", "fig8_hit_rate", "fig9_ceiling")
