"""Power readers: INA3221 rails, serial meters, RAPL, NVML, jetson-stats. Each implements
`jetbench.hw.meters.base.PowerSource`; `registry.open_sources` builds them from `--meter` specs."""
