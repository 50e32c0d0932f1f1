//! `PJRT_Device`: one device of a client.

use std::fmt;
use std::sync::Arc;

use super::api::copy_str;
use super::buffer::Buffer;
use super::client::{Client, ClientInner};
use super::raw::{PJRT_Device, PJRT_DeviceDescription, slot};
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

// SAFETY: the header: a device "has the same lifetime as `client`. It is owned by
// `client`"; the `Arc` keeps the client alive, and a device handle is only read
// (queries), which PJRT allows from any thread.
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

    /// The device's description. The header: it "has the lifetime of `device`",
    /// which lives as long as the client (`self` holds it).
    fn description(&self) -> Result<*mut PJRT_DeviceDescription> {
        let api = &self.client.api;
        // SAFETY: `self.raw` is a device of the live client (owned by it).
        let a = unsafe { api.query(slot::PJRT_Device_GetDescription, |a| a.device = self.raw)? };
        Ok(a.device_description)
    }

    /// The device's global id.
    pub fn id(&self) -> Result<i32> {
        let d = self.description()?;
        // SAFETY: `d` is the live description of this device.
        let a = unsafe {
            self.client
                .api
                .query(slot::PJRT_DeviceDescription_Id, |a| {
                    a.device_description = d
                })?
        };
        Ok(a.id)
    }

    /// The kind of device (e.g. `"cpu"`, `"NVIDIA H100 80GB HBM3"`).
    pub fn kind(&self) -> Result<String> {
        let d = self.description()?;
        // SAFETY: `d` is live; the string is owned by the description (header) and
        // copied at once.
        unsafe {
            let a = self
                .client
                .api
                .query(slot::PJRT_DeviceDescription_Kind, |a| {
                    a.device_description = d
                })?;
            Ok(copy_str(a.device_kind, a.device_kind_size))
        }
    }

    /// A longer description for debugging.
    pub fn debug_string(&self) -> Result<String> {
        let d = self.description()?;
        // SAFETY: as in `kind`.
        unsafe {
            let a = self
                .client
                .api
                .query(slot::PJRT_DeviceDescription_DebugString, |a| {
                    a.device_description = d
                })?;
            Ok(copy_str(a.debug_string, a.debug_string_size))
        }
    }

    /// Whether this process can use the device.
    pub fn is_addressable(&self) -> Result<bool> {
        // SAFETY: `self.raw` is a live device of the client.
        let a = unsafe {
            self.client
                .api
                .query(slot::PJRT_Device_IsAddressable, |a| a.device = self.raw)?
        };
        Ok(a.is_addressable)
    }

    /// The device's hardware id local to this host.
    pub fn local_hardware_id(&self) -> Result<i32> {
        // SAFETY: `self.raw` is a live device of the client.
        let a = unsafe {
            self.client
                .api
                .query(slot::PJRT_Device_LocalHardwareId, |a| a.device = self.raw)?
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
