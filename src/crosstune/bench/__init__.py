"""The MLPerf-HPC-style training benchmark and the roofline of cost-model training."""
