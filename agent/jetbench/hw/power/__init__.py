"""Power readers: INA3221 rails, serial meters, RAPL, NVML, jetson-stats. Each implements
`jetbench.power.source.PowerSource`; `spec.open_sources` builds them from `--meter` specs."""
