#!/bin/sh
# The files NVIDIA's jetson_clocks reads on each board family, read the way a shell script
# reads them, under a root prefix: `sh jetson_clocks_reads.sh ROOT`.
#
# Written for jetbench's tests from the facts in docs/hardware.md (which files each release's
# script opens); it is not NVIDIA's script and runs nothing of it. It fails loudly (exit 1, the
# file named) on a file that is missing or reads empty, as the real script then misbehaves
# (an empty rate written back: EINVAL; "Error! No GPU found!").
set -u
R="${1:?usage: jetson_clocks_reads.sh ROOT}"
failed=0
checked=0

# Read one file under the root; NULs dropped (device-tree strings), as `tr -d '\0'` does.
value() {
    [ -r "$R$1" ] && tr -d '\000' <"$R$1" | tr -d '\n'
}

need() {
    for f in "$@"; do
        checked=$((checked + 1))
        if [ ! -e "$R$f" ]; then
            echo "MISSING $f" >&2
            failed=1
            continue
        fi
        v="$(value "$f")"
        if [ -z "$(printf '%s' "$v" | tr -d ' \t')" ]; then
            echo "EMPTY $f" >&2
            failed=1
            continue
        fi
        echo "ok $f=$v"
    done
}

compat="$(value /proc/device-tree/compatible)"
need /proc/device-tree/compatible /proc/device-tree/model
case "$compat" in
    *tegra264*) soc=tegra264 ;;
    *tegra234*) soc=tegra234 ;;
    *tegra194*) soc=tegra194 ;;
    *tegra186*) soc=tegra186 ;;
    *tegra210*) soc=tegra210 ;;
    *) echo "UNKNOWN SoC in compatible: $compat" >&2; exit 1 ;;
esac
l4t="$(sed -n 's/^# R\([0-9][0-9]*\) (release).*/\1/p' "$R/etc/nv_tegra_release" 2>/dev/null)"
[ -n "$l4t" ] || { echo "MISSING /etc/nv_tegra_release (no L4T release)" >&2; exit 1; }
echo "family $soc R$l4t"

# CPUs: the online list; per core its cpufreq files and each idle state's name and disable.
need /sys/devices/system/cpu/online
for dir in "$R"/sys/devices/system/cpu/cpu[0-9]*; do
    cpu="${dir#"$R"}"
    if [ -e "$dir/cpufreq/scaling_governor" ]; then
        need "$cpu/cpufreq/scaling_governor" "$cpu/cpufreq/scaling_min_freq" \
            "$cpu/cpufreq/scaling_max_freq" "$cpu/cpufreq/scaling_cur_freq"
    fi
    for state in "$dir"/cpuidle/state[0-9]*; do
        [ -d "$state" ] || continue
        need "${state#"$R"}/name" "${state#"$R"}/disable"
    done
done

# The GPU and EMC, by release.
bpmp=/sys/kernel/debug/bpmp/debug/clk/emc
if [ "$soc" = tegra210 ] && [ "$l4t" -lt 28 ]; then
    # R24: cpuquiet, the cluster switch, the debugfs clock overrides' limits and state.
    need /sys/devices/system/cpu/cpuquiet/tegra_cpuquiet/enable
    need /sys/kernel/cluster/immediate /sys/kernel/cluster/force /sys/kernel/cluster/active
    for clk in gbus emc; do
        for f in min max rate state; do
            need "/sys/kernel/debug/clock/override.$clk/$f"
        done
    done
elif [ "$soc" = tegra264 ]; then
    # Thor (R38+): per docs/hardware.md, the GPC clock's devfreq node and the bwmgr node.
    for node in gpu-gpc-0 bwmgr; do
        need "/sys/class/devfreq/$node/min_freq" "/sys/class/devfreq/$node/max_freq" \
            "/sys/class/devfreq/$node/cur_freq"
    done
elif [ "$l4t" -ge 35 ]; then
    # R35/R36: the GPU is named by gpu.0's compatible, its devfreq node found by the same one.
    need /sys/devices/platform/gpu.0/of_node/compatible /sys/devices/platform/gpu.0/railgate_enable
    gpu="$(value /sys/devices/platform/gpu.0/of_node/compatible)"
    case "$gpu" in
        nvidia,gv11b | nvidia,gp10b | nvidia,ga10b) ;;
        *) echo "UNKNOWN GPU compatible: '$gpu'" >&2; failed=1 ;;
    esac
    found=""
    for node in "$R"/sys/class/devfreq/*; do
        [ -f "$node/device/of_node/compatible" ] || continue
        if [ "$(value "${node#"$R"}/device/of_node/compatible")" = "$gpu" ]; then
            found="${node#"$R"}"
            break
        fi
    done
    if [ -z "$found" ]; then
        echo "NO devfreq node whose device's compatible is '$gpu'" >&2
        failed=1
    else
        need "$found/min_freq" "$found/max_freq" "$found/cur_freq"
    fi
    need "$bpmp/min_rate" "$bpmp/max_rate" "$bpmp/rate" "$bpmp/mrq_rate_locked"
else
    # R28-R32: the GPU's devfreq node by its of_node name, railgating beside it.
    found=""
    for node in "$R"/sys/class/devfreq/*; do
        case "$(value "${node#"$R"}/device/of_node/name")" in
            gv11b | gp10b | gpu) found="${node#"$R"}"; break ;;
        esac
    done
    if [ -z "$found" ]; then
        echo "NO GPU devfreq node (of_node name gv11b, gp10b or gpu)" >&2
        failed=1
    else
        need "$found/min_freq" "$found/max_freq" "$found/cur_freq" \
            "$found/device/railgate_enable"
    fi
    if [ "$soc" = tegra210 ]; then
        need /sys/kernel/debug/tegra_bwmgr/emc_min_rate /sys/kernel/debug/tegra_bwmgr/emc_max_rate
        need /sys/kernel/debug/clk/override.emc/clk_rate \
            /sys/kernel/debug/clk/override.emc/clk_update_rate \
            /sys/kernel/debug/clk/override.emc/clk_state
    else
        need /sys/kernel/nvpmodel_emc_cap/emc_iso_cap
        need "$bpmp/min_rate" "$bpmp/max_rate" "$bpmp/rate" "$bpmp/mrq_rate_locked"
    fi
fi

# The fan: pwm-fan's target_pwm (with temp_control), tegra_fan (R24), or hwmon pwm under pwm-fan.
if [ -e "$R/sys/devices/pwm-fan/target_pwm" ]; then
    need /sys/devices/pwm-fan/target_pwm /sys/devices/pwm-fan/temp_control
elif [ -e "$R/sys/kernel/debug/tegra_fan/target_pwm" ]; then
    need /sys/kernel/debug/tegra_fan/target_pwm
else
    for pwm in "$R"/sys/devices/platform/pwm-fan*/hwmon/hwmon*/pwm[0-9]*; do
        [ -e "$pwm" ] && need "${pwm#"$R"}"
    done
fi

echo "checked $checked file(s)"
if [ "$failed" -ne 0 ]; then
    echo "FAILED: jetson_clocks would not run on this tree ($R)" >&2
    exit 1
fi
