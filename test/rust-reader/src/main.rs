//! Reads the NVML library found as libnvidia-ml.so.1 (LD_LIBRARY_PATH) the way a Rust tool built
//! on nvml-wrapper does, and prints what it read as one JSON object: identity, memory (v1 through
//! the wrapper, v2 through the raw bindings), process lists (the wrapper's _v3 and _v2 calls,
//! which assume 24-byte entries), MIG devices, and the monitoring queries. A failed query is
//! printed as {"error": "<the wrapper's error>"}, so nothing is silently left out.
use nvml_wrapper::enum_wrappers::device::{Clock, EccCounter, MemoryError, PcieUtilCounter, TemperatureSensor};
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::struct_wrappers::device::ProcessInfo;
use nvml_wrapper::{Device, Nvml};
use nvml_wrapper_sys::bindings::{nvmlDevice_t, nvmlMemory_v2_t, NvmlLib};
use std::fmt::Write;

const LIBRARY: &str = "libnvidia-ml.so.1";

fn quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => write!(out, "\\u{:04x}", c as u32).unwrap(),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn err(e: NvmlError) -> String {
    format!("{{\"error\":{}}}", quote(&format!("{:?}", e)))
}

fn field<T, F: Fn(T) -> String>(r: Result<T, NvmlError>, f: F) -> String {
    match r {
        Ok(v) => f(v),
        Err(e) => err(e),
    }
}

fn processes(r: Result<Vec<ProcessInfo>, NvmlError>) -> String {
    field(r, |list| {
        let items: Vec<String> = list
            .iter()
            .map(|p| {
                let used = match p.used_gpu_memory {
                    UsedGpuMemory::Used(b) => b.to_string(),
                    UsedGpuMemory::Unavailable => "null".into(),
                };
                let id = |v: Option<u32>| v.map(|x| x.to_string()).unwrap_or_else(|| "null".into());
                format!(
                    "{{\"pid\":{},\"usedBytes\":{},\"gpuInstanceId\":{},\"computeInstanceId\":{}}}",
                    p.pid,
                    used,
                    id(p.gpu_instance_id),
                    id(p.compute_instance_id)
                )
            })
            .collect();
        format!("[{}]", items.join(","))
    })
}

/// Memory through nvmlDeviceGetMemoryInfo_v2 (the wrapper 0.9 only calls the v1 entry point).
fn memory_v2(lib: &NvmlLib, handle: nvmlDevice_t) -> String {
    if lib.nvmlDeviceGetMemoryInfo_v2.is_err() {
        return "{\"error\":\"FunctionNotFound\"}".into();
    }
    let mut m = nvmlMemory_v2_t { version: (std::mem::size_of::<nvmlMemory_v2_t>() as u32) | (2 << 24), total: 0, reserved: 0, free: 0, used: 0 };
    let rc = unsafe { lib.nvmlDeviceGetMemoryInfo_v2(handle, &mut m) };
    if rc != 0 {
        return format!("{{\"error\":\"nvmlReturn {}\"}}", rc);
    }
    format!("{{\"totalBytes\":{},\"reservedBytes\":{},\"freeBytes\":{},\"usedBytes\":{}}}", m.total, m.reserved, m.free, m.used)
}

/// MIG mode and devices through the raw bindings (the wrapper 0.9 has no MIG calls).
fn mig(lib: &NvmlLib, handle: nvmlDevice_t) -> String {
    let (mut current, mut pending) = (0u32, 0u32);
    let rc = unsafe { lib.nvmlDeviceGetMigMode(handle, &mut current, &mut pending) };
    if rc != 0 {
        return format!("\"migMode\":{{\"error\":\"nvmlReturn {}\"}}", rc);
    }
    let mut max = 0u32;
    unsafe { lib.nvmlDeviceGetMaxMigDeviceCount(handle, &mut max) };
    let mut devices = Vec::new();
    for slot in 0..max {
        let mut m: nvmlDevice_t = std::ptr::null_mut();
        if unsafe { lib.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot, &mut m) } != 0 {
            continue; // a hole
        }
        let mut uuid = [0 as std::os::raw::c_char; 96];
        unsafe { lib.nvmlDeviceGetUUID(m, uuid.as_mut_ptr(), 96) };
        let uuid = unsafe { std::ffi::CStr::from_ptr(uuid.as_ptr()) }.to_string_lossy().into_owned();
        let (mut gi, mut ci) = (0u32, 0u32);
        unsafe { lib.nvmlDeviceGetGpuInstanceId(m, &mut gi) };
        unsafe { lib.nvmlDeviceGetComputeInstanceId(m, &mut ci) };
        let mut procs = 0u32;
        unsafe { lib.nvmlDeviceGetComputeRunningProcesses_v3(m, &mut procs, std::ptr::null_mut()) };
        devices.push(format!(
            "{{\"index\":{},\"uuid\":{},\"gpuInstanceId\":{},\"computeInstanceId\":{},\"memory\":{},\"processCount\":{}}}",
            slot,
            quote(&uuid),
            gi,
            ci,
            memory_v2(lib, m),
            procs
        ));
    }
    format!("\"migMode\":{},\"maxMigDevices\":{},\"migDevices\":[{}]", current == 1, max, devices.join(","))
}

fn device_json(device: &Device, lib: &NvmlLib, index: u32) -> String {
    let handle = unsafe { device.handle() };
    let mut out = format!("{{\"index\":{}", index);
    let mut add = |key: &str, value: String| write!(out, ",{}:{}", quote(key), value).unwrap();
    add("name", field(device.name(), |s| quote(&s)));
    add("uuid", field(device.uuid(), |s| quote(&s)));
    add("pciBusId", field(device.pci_info(), |p| quote(&p.bus_id)));
    add("minorNumber", field(device.minor_number(), |v| v.to_string()));
    add("computeCapability", field(device.cuda_compute_capability(), |c| quote(&format!("{}.{}", c.major, c.minor))));
    add("memoryV1", field(device.memory_info(), |m| format!("{{\"totalBytes\":{},\"freeBytes\":{},\"usedBytes\":{}}}", m.total, m.free, m.used)));
    add("memoryV2", memory_v2(lib, handle));
    add("computeProcesses", processes(device.running_compute_processes()));
    add("graphicsProcesses", processes(device.running_graphics_processes()));
    add("computeProcessesV2", processes(device.running_compute_processes_v2()));
    add("persistenceMode", field(device.is_in_persistent_mode(), |v| v.to_string()));
    add("computeMode", field(device.compute_mode(), |m| quote(&format!("{:?}", m))));
    add("utilization", field(device.utilization_rates(), |u| format!("{{\"gpuPercent\":{},\"memoryPercent\":{}}}", u.gpu, u.memory)));
    add("temperatureC", field(device.temperature(TemperatureSensor::Gpu), |v| v.to_string()));
    add("powerMilliwatts", field(device.power_usage(), |v| v.to_string()));
    add("fanSpeedPercent", field(device.fan_speed(0), |v| v.to_string()));
    add("powerLimitMilliwatts", field(device.power_management_limit(), |v| v.to_string()));
    add("enforcedPowerLimitMilliwatts", field(device.enforced_power_limit(), |v| v.to_string()));
    let clocks = |max: bool| {
        let read = |c: Clock| if max { device.max_clock_info(c) } else { device.clock_info(c) };
        let parts = [("graphics", Clock::Graphics), ("sm", Clock::SM), ("memory", Clock::Memory), ("video", Clock::Video)];
        let items: Vec<String> = parts.iter().map(|(k, c)| format!("{}:{}", quote(k), field(read(c.clone()), |v| v.to_string()))).collect();
        format!("{{{}}}", items.join(","))
    };
    add("clocksMHz", clocks(false));
    add("maxClocksMHz", clocks(true));
    add("performanceState", field(device.performance_state(), |p| quote(&format!("{:?}", p))));
    add("eccCorrected", field(device.total_ecc_errors(MemoryError::Corrected, EccCounter::Volatile), |v| v.to_string()));
    add("eccUncorrected", field(device.total_ecc_errors(MemoryError::Uncorrected, EccCounter::Volatile), |v| v.to_string()));
    add("encoderUtilization", field(device.encoder_utilization(), |u| u.utilization.to_string()));
    add("decoderUtilization", field(device.decoder_utilization(), |u| u.utilization.to_string()));
    add("displayActive", field(device.is_display_active(), |v| v.to_string()));
    add("pcieTxKBps", field(device.pcie_throughput(PcieUtilCounter::Send), |v| v.to_string()));
    add("pcieRxKBps", field(device.pcie_throughput(PcieUtilCounter::Receive), |v| v.to_string()));
    add("serial", field(device.serial(), |s| quote(&s)));
    add("bar1", field(device.bar1_memory_info(), |b| format!("{{\"totalBytes\":{},\"usedBytes\":{}}}", b.total, b.used)));
    out.push(',');
    out.push_str(&mig(lib, handle));
    out.push('}');
    out
}

fn main() {
    let nvml = match Nvml::builder().lib_path(std::ffi::OsStr::new(LIBRARY)).init() {
        Ok(n) => n,
        Err(e) => {
            println!("{{\"init\":{}}}", err(e));
            std::process::exit(3);
        }
    };
    // The same library a second time for the raw calls: dlopen returns the loaded instance.
    let lib = unsafe { NvmlLib::new(LIBRARY) }.expect("libnvidia-ml.so.1 loads a second time");
    let mut out = String::from("{");
    write!(out, "\"driverVersion\":{}", field(nvml.sys_driver_version(), |s| quote(&s))).unwrap();
    let count = nvml.device_count().unwrap_or(0);
    write!(out, ",\"count\":{},\"devices\":[", count).unwrap();
    let devices: Vec<String> = (0..count)
        .map(|i| match nvml.device_by_index(i) {
            Ok(d) => device_json(&d, &lib, i),
            Err(e) => format!("{{\"index\":{},\"handle\":{}}}", i, err(e)),
        })
        .collect();
    out.push_str(&devices.join(","));
    out.push_str("]}");
    println!("{}", out);
}
