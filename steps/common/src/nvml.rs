//! NVML, opened at run time (`libnvidia-ml.so.1`, as cudarc opens libcuda): the SM clock, the
//! power draw, the temperature and the reasons the clock is held down, read while timed launches
//! run, so every timing says at what clock it was taken. A machine without NVML (or a sandbox
//! that hides it) still runs: [`Nvml::open`] then says why there are no readings.

use crate::gpu::Gpu;
use anyhow::{anyhow, bail, Context, Result};
use cudarc::driver::sys;
use serde::{Deserialize, Serialize};
use std::ffi::{c_char, c_int, c_uint, c_ulonglong, CStr};

type Ret = c_int;
type Device = *mut std::ffi::c_void;
const NVML_SUCCESS: Ret = 0;
/// `nvmlClockType_t::NVML_CLOCK_SM`.
const NVML_CLOCK_SM: c_uint = 1;
/// `nvmlTemperatureSensors_t::NVML_TEMPERATURE_GPU`.
const NVML_TEMPERATURE_GPU: c_uint = 0;

/// The bits of `nvmlDeviceGetCurrentClocksEventReasons` (nvml.h, "Clock Event Reasons"), named
/// as nvidia-smi names them.
pub const CLOCK_EVENT_REASONS: &[(u64, &str)] = &[
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks_setting"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
];

/// The names of the bits set in a clock-event mask; unknown bits as hex.
pub fn reason_names(mask: u64) -> Vec<String> {
    let mut names: Vec<String> = CLOCK_EVENT_REASONS
        .iter()
        .filter(|(bit, _)| mask & bit != 0)
        .map(|(_, n)| n.to_string())
        .collect();
    let known = CLOCK_EVENT_REASONS.iter().fold(0, |m, (b, _)| m | b);
    if mask & !known != 0 {
        names.push(format!("0x{:x}", mask & !known));
    }
    names
}

/// One reading of the GPU's state.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reading {
    pub sm_mhz: u32,
    /// NVML's power draw; on Hopper an average over the last second, so it says how hard the
    /// GPU has been working, not what one launch drew.
    pub power_w: Option<f64>,
    pub temperature_c: Option<u32>,
    /// Why the clock is below its maximum (a [`CLOCK_EVENT_REASONS`] mask), if NVML says.
    pub reasons: Option<u64>,
}

/// Where the driver and the GPU stand, for the header of a results file.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DeviceState {
    /// The kernel driver's version as NVML reports it (e.g. 580.159.04).
    pub driver: String,
    pub name: String,
    pub sm_mhz: u32,
    pub power_w: Option<f64>,
    pub temperature_c: Option<u32>,
    pub clock_event_reasons: Vec<String>,
}

type FnInit = unsafe extern "C" fn() -> Ret;
type FnByPci = unsafe extern "C" fn(*const c_char, *mut Device) -> Ret;
type FnClock = unsafe extern "C" fn(Device, c_uint, *mut c_uint) -> Ret;
type FnPower = unsafe extern "C" fn(Device, *mut c_uint) -> Ret;
type FnTemp = unsafe extern "C" fn(Device, c_uint, *mut c_uint) -> Ret;
type FnReasons = unsafe extern "C" fn(Device, *mut c_ulonglong) -> Ret;
type FnDriver = unsafe extern "C" fn(*mut c_char, c_uint) -> Ret;
type FnName = unsafe extern "C" fn(Device, *mut c_char, c_uint) -> Ret;
type FnShutdown = unsafe extern "C" fn() -> Ret;

/// NVML opened for the GPU the harness runs on (matched by PCI address, not by index: NVML
/// ignores CUDA_VISIBLE_DEVICES).
pub struct Nvml {
    device: Device,
    clock: FnClock,
    power: FnPower,
    temp: FnTemp,
    reasons: Option<FnReasons>,
    driver: FnDriver,
    name: FnName,
    shutdown: FnShutdown,
    // Last: the function pointers above point into it.
    _lib: libloading::Library,
}

impl Nvml {
    /// NVML for `gpu`, or why not.
    pub fn open(gpu: &Gpu) -> Result<Nvml> {
        // SAFETY: loading the driver's NVML library runs its initialisers, as cudarc does for
        // libcuda; nothing else is assumed about it.
        let lib = unsafe { libloading::Library::new("libnvidia-ml.so.1") }
            .context("cannot open libnvidia-ml.so.1 (NVML)")?;
        // SAFETY: each symbol has the C signature nvml.h declares for it.
        let nvml = unsafe {
            let sym = |name: &str| -> Result<*const ()> {
                let s: libloading::Symbol<*const ()> = lib
                    .get(name.as_bytes())
                    .with_context(|| format!("NVML has no {name}"))?;
                Ok(*s)
            };
            let init: FnInit = std::mem::transmute(sym("nvmlInit_v2")?);
            let by_pci: FnByPci = std::mem::transmute(sym("nvmlDeviceGetHandleByPciBusId_v2")?);
            let reasons = sym("nvmlDeviceGetCurrentClocksEventReasons")
                .or_else(|_| sym("nvmlDeviceGetCurrentClocksThrottleReasons"))
                .ok()
                .map(|p| std::mem::transmute::<*const (), FnReasons>(p));
            let clock: FnClock = std::mem::transmute(sym("nvmlDeviceGetClockInfo")?);
            let power: FnPower = std::mem::transmute(sym("nvmlDeviceGetPowerUsage")?);
            let temp: FnTemp = std::mem::transmute(sym("nvmlDeviceGetTemperature")?);
            let driver: FnDriver = std::mem::transmute(sym("nvmlSystemGetDriverVersion")?);
            let name: FnName = std::mem::transmute(sym("nvmlDeviceGetName")?);
            let shutdown: FnShutdown = std::mem::transmute(sym("nvmlShutdown")?);
            let r = init();
            if r != NVML_SUCCESS {
                bail!("nvmlInit failed (NVML error {r})");
            }
            let pci = pci_bus_id(gpu)?;
            let c = std::ffi::CString::new(pci.clone())?;
            let mut device: Device = std::ptr::null_mut();
            let r = by_pci(c.as_ptr(), &mut device);
            if r != NVML_SUCCESS {
                shutdown();
                bail!("NVML has no GPU at PCI address {pci} (NVML error {r})");
            }
            Nvml {
                device,
                clock,
                power,
                temp,
                reasons,
                driver,
                name,
                shutdown,
                _lib: lib,
            }
        };
        // A first reading, so a device NVML lists but cannot read fails here, not mid-run.
        nvml.read()?;
        Ok(nvml)
    }

    /// The SM clock, and what else NVML can say now.
    pub fn read(&self) -> Result<Reading> {
        let r = self.read_clock()?;
        Ok(self.add_power(r))
    }

    /// The instantaneous part of a reading: the SM clock and why it is held down, now. The
    /// power and temperature are left empty (see [`Nvml::add_power`]).
    pub fn read_clock(&self) -> Result<Reading> {
        let mut mhz: c_uint = 0;
        // SAFETY: `device` came from NVML and NVML is initialised; plain out-parameters.
        let r = unsafe { (self.clock)(self.device, NVML_CLOCK_SM, &mut mhz) };
        if r != NVML_SUCCESS {
            bail!("nvmlDeviceGetClockInfo failed (NVML error {r})");
        }
        let reasons = self.reasons.and_then(|f| {
            let mut mask: c_ulonglong = 0;
            // SAFETY: as above.
            (unsafe { f(self.device, &mut mask) } == NVML_SUCCESS).then_some(mask)
        });
        Ok(Reading {
            sm_mhz: mhz,
            power_w: None,
            temperature_c: None,
            reasons,
        })
    }

    /// `r` with the power draw and temperature: averages over time on the driver's side, which
    /// may take longer to query than a launch lasts, so they are read after the clock.
    pub fn add_power(&self, r: Reading) -> Reading {
        let mut mw: c_uint = 0;
        // SAFETY: `device` came from NVML and NVML is initialised; plain out-parameters.
        let power_w = (unsafe { (self.power)(self.device, &mut mw) } == NVML_SUCCESS)
            .then_some(f64::from(mw) / 1e3);
        let mut c: c_uint = 0;
        // SAFETY: as above.
        let temperature_c = (unsafe { (self.temp)(self.device, NVML_TEMPERATURE_GPU, &mut c) }
            == NVML_SUCCESS)
            .then_some(c);
        Reading {
            power_w,
            temperature_c,
            ..r
        }
    }

    /// The driver's version, the GPU's name and a reading.
    pub fn state(&self) -> Result<DeviceState> {
        let text = |f: &dyn Fn(*mut c_char, c_uint) -> Ret| -> String {
            let mut buf = [0 as c_char; 96];
            if f(buf.as_mut_ptr(), buf.len() as c_uint) != NVML_SUCCESS {
                return String::new();
            }
            // SAFETY: NVML wrote a NUL-terminated string into the buffer (zeroed beforehand).
            unsafe { CStr::from_ptr(buf.as_ptr()) }
                .to_string_lossy()
                .into_owned()
        };
        // SAFETY: NVML is initialised; the buffers are as long as the lengths passed.
        let driver = text(&|p, n| unsafe { (self.driver)(p, n) });
        // SAFETY: as above.
        let name = text(&|p, n| unsafe { (self.name)(self.device, p, n) });
        let r = self.read()?;
        Ok(DeviceState {
            driver,
            name,
            sm_mhz: r.sm_mhz,
            power_w: r.power_w,
            temperature_c: r.temperature_c,
            clock_event_reasons: r.reasons.map(reason_names).unwrap_or_default(),
        })
    }
}

impl Drop for Nvml {
    fn drop(&mut self) {
        // SAFETY: pairs the nvmlInit of `open`.
        unsafe {
            (self.shutdown)();
        }
    }
}

/// The GPU's PCI address as the CUDA driver gives it ("0000:19:00.0"), which NVML accepts.
fn pci_bus_id(gpu: &Gpu) -> Result<String> {
    let mut buf = [0 as c_char; 32];
    // SAFETY: the buffer is as long as the length passed; the device belongs to the context.
    let r = unsafe {
        sys::cuDeviceGetPCIBusId(buf.as_mut_ptr(), buf.len() as c_int, gpu.ctx.cu_device())
    };
    if r != sys::CUresult::CUDA_SUCCESS {
        return Err(anyhow!("cuDeviceGetPCIBusId failed: {r:?}"));
    }
    // SAFETY: the driver wrote a NUL-terminated string into the zeroed buffer.
    Ok(unsafe { CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_named() {
        assert_eq!(reason_names(0), Vec::<String>::new());
        assert_eq!(reason_names(0x4), vec!["sw_power_cap"]);
        assert_eq!(
            reason_names(0x4 | 0x20 | 0x1000),
            vec!["sw_power_cap", "sw_thermal_slowdown", "0x1000"]
        );
    }
}
