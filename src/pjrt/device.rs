//! `PJRT_Device`: one device of a client.

use std::fmt;
use std::sync::Arc;

use super::api::copy_str;
use super::buffer::Buffer;
use super::client::{Client, ClientInner};
use super::raw::{self, PJRT_Device, PJRT_DeviceDescription, slot};
use crate::error::Result;
use crate::shape::NativeType;

/// A device (a CPU core group, a GPU, a TPU core) owned by a [`Client`].
///
/// # Thread safety
/// `Device` is `Send` and `Sync`: devices are immutable handles owned by a
/// thread-safe client.
#[derive(Clone)]
pub struct Device {
    pub(crate) client: Arc<ClientInner>,
    pub(crate) raw: *mut PJRT_Device,
}

// SAFETY: a device pointer is an immutable handle owned by the client, which is
// thread-safe; the `Arc` keeps the client alive.
unsafe impl Send for Device {}
// SAFETY: see `Send`.
unsafe impl Sync for Device {}

impl Device {
    pub(crate) fn new(client: &Arc<ClientInner>, raw: *mut PJRT_Device) -> Device {
        Device {
            client: client.clone(),
            raw,
        }
    }

    fn description(&self) -> Result<*mut PJRT_DeviceDescription> {
        let mut a = raw::PJRT_Device_GetDescription_Args::new();
        a.device = self.raw;
        // SAFETY: the description is owned by the device.
        unsafe {
            self.client
                .api
                .call(slot::PJRT_Device_GetDescription, &mut a)?
        };
        Ok(a.device_description)
    }

    /// The device's global id.
    pub fn id(&self) -> Result<i32> {
        let mut a = raw::PJRT_DeviceDescription_Id_Args::new();
        a.device_description = self.description()?;
        // SAFETY: plain out-parameter.
        unsafe {
            self.client
                .api
                .call(slot::PJRT_DeviceDescription_Id, &mut a)?
        };
        Ok(a.id)
    }

    /// The kind of device (e.g. `"cpu"`, `"NVIDIA H100 80GB HBM3"`).
    pub fn kind(&self) -> Result<String> {
        let mut a = raw::PJRT_DeviceDescription_Kind_Args::new();
        a.device_description = self.description()?;
        // SAFETY: the string is owned by the description; copied at once.
        unsafe {
            self.client
                .api
                .call(slot::PJRT_DeviceDescription_Kind, &mut a)?;
            Ok(copy_str(a.device_kind, a.device_kind_size))
        }
    }

    /// A longer description for debugging.
    pub fn debug_string(&self) -> Result<String> {
        let mut a = raw::PJRT_DeviceDescription_DebugString_Args::new();
        a.device_description = self.description()?;
        // SAFETY: as in `kind`.
        unsafe {
            self.client
                .api
                .call(slot::PJRT_DeviceDescription_DebugString, &mut a)?;
            Ok(copy_str(a.debug_string, a.debug_string_size))
        }
    }

    /// Whether this process can use the device.
    pub fn is_addressable(&self) -> Result<bool> {
        let mut a = raw::PJRT_Device_IsAddressable_Args::new();
        a.device = self.raw;
        // SAFETY: plain out-parameter.
        unsafe {
            self.client
                .api
                .call(slot::PJRT_Device_IsAddressable, &mut a)?
        };
        Ok(a.is_addressable)
    }

    /// The device's hardware id local to this host.
    pub fn local_hardware_id(&self) -> Result<i32> {
        let mut a = raw::PJRT_Device_LocalHardwareId_Args::new();
        a.device = self.raw;
        // SAFETY: plain out-parameter.
        unsafe {
            self.client
                .api
                .call(slot::PJRT_Device_LocalHardwareId, &mut a)?
        };
        Ok(a.local_hardware_id)
    }

    /// The client that owns this device.
    pub fn client(&self) -> Client {
        Client {
            inner: self.client.clone(),
        }
    }

    /// Copies host data to a new buffer on this device.
    pub fn buffer_from_host<T: NativeType>(&self, data: &[T], dims: &[i64]) -> Result<Buffer> {
        self.client().upload(data, dims, self.raw)
    }
}

impl PartialEq for Device {
    fn eq(&self, other: &Self) -> bool {
        self.raw == other.raw
    }
}

impl Eq for Device {}

impl fmt::Debug for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Device")
            .field("id", &self.id().ok())
            .field("kind", &self.kind().ok())
            .finish()
    }
}
