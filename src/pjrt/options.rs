//! Client create options and compile options.

use prost::Message;

use super::WaitPolicy;
use crate::proto;

/// Options for [`Client::new`](super::Client::new): the plugin's named create options,
/// and how the client's threads wait for asynchronous work ([`WaitPolicy`]).
///
/// ```
/// use xlaclient::pjrt::WaitPolicy;
/// let opts = xlaclient::ClientOptions::new()
///     .cpu_device_count(1)
///     .asynchronous(false)
///     .wait_policy(WaitPolicy::Park);
/// assert_eq!(opts.len(), 2);
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClientOptions {
    pub(crate) values: Vec<(String, super::NamedValue)>,
    pub(crate) wait: WaitPolicy,
}

impl ClientOptions {
    /// No options: the plugin's defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// How waits for this client's events (transfers, executions) poll and park;
    /// [`WaitPolicy::Auto`] by default.
    pub fn wait_policy(mut self, policy: WaitPolicy) -> Self {
        self.wait = policy;
        self
    }

    /// Number of named create options set.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// True when no option is set.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Sets any named option (replacing an earlier value of the same name).
    pub fn set(mut self, name: &str, value: super::NamedValue) -> Self {
        self.values.retain(|(n, _)| n != name);
        self.values.push((name.to_string(), value));
        self
    }

    /// CPU plugin: number of CPU devices to create (the plugin's default is 4).
    pub fn cpu_device_count(self, n: i64) -> Self {
        self.set("cpu_device_count", super::NamedValue::Int64(n))
    }

    /// CPU plugin: run work asynchronously on worker threads (`true`, the default) or
    /// on the calling thread (`false`; honoured by recent plugins only, ignored by
    /// older ones).
    pub fn asynchronous(self, on: bool) -> Self {
        self.set("asynchronous", super::NamedValue::Bool(on))
    }
}

/// XLA compile options (`CompileOptionsProto`), exposed in full.
///
/// The default is one replica and one partition, which every plugin accepts (an empty
/// `CompileOptionsProto` aborts some plugins). Anything else can be set through
/// [`CompileOptions::proto_mut`].
///
/// ```
/// let opts = xlaclient::CompileOptions::new().num_replicas(2);
/// assert_eq!(opts.proto().executable_build_options.as_ref().unwrap().num_replicas, 2);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct CompileOptions {
    proto: proto::CompileOptionsProto,
}

impl Default for CompileOptions {
    fn default() -> Self {
        CompileOptions {
            proto: proto::CompileOptionsProto {
                executable_build_options: Some(proto::ExecutableBuildOptionsProto {
                    num_replicas: 1,
                    num_partitions: 1,
                    ..Default::default()
                }),
                ..Default::default()
            },
        }
    }
}

impl CompileOptions {
    /// One replica, one partition.
    pub fn new() -> Self {
        Self::default()
    }

    fn build_options(&mut self) -> &mut proto::ExecutableBuildOptionsProto {
        self.proto
            .executable_build_options
            .get_or_insert_with(Default::default)
    }

    /// Number of replicas (data-parallel copies of the program).
    pub fn num_replicas(mut self, n: i64) -> Self {
        self.build_options().num_replicas = n;
        self
    }

    /// Number of partitions (model-parallel shards of the program).
    pub fn num_partitions(mut self, n: i64) -> Self {
        self.build_options().num_partitions = n;
        self
    }

    /// Explicit device assignment: `devices[replica][partition]` = device id.
    pub fn device_assignment(mut self, devices: &[Vec<i64>]) -> Self {
        let replicas = devices.len() as i32;
        let partitions = devices.first().map_or(0, |r| r.len()) as i32;
        let computation_devices = (0..partitions as usize)
            .map(|p| proto::device_assignment_proto::ComputationDevice {
                replica_device_ids: devices
                    .iter()
                    .map(|r| r.get(p).copied().unwrap_or(-1))
                    .collect(),
            })
            .collect();
        self.build_options().device_assignment = Some(proto::DeviceAssignmentProto {
            replica_count: replicas,
            computation_count: partitions,
            computation_devices,
        });
        self
    }

    /// The options as a proto.
    pub fn proto(&self) -> &proto::CompileOptionsProto {
        &self.proto
    }

    /// The options as a proto, for fields without a helper.
    pub fn proto_mut(&mut self) -> &mut proto::CompileOptionsProto {
        &mut self.proto
    }

    /// Decodes serialized `CompileOptionsProto` bytes.
    pub fn from_bytes(bytes: &[u8]) -> crate::Result<Self> {
        let proto =
            proto::CompileOptionsProto::decode(bytes).map_err(|e| crate::Error::InvalidModule {
                reason: format!("compile options do not decode: {e}"),
            })?;
        Ok(CompileOptions { proto })
    }

    /// Serialized bytes, as `PJRT_Client_Compile` takes them.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.proto.encode_to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_compile_options_are_the_minimal_proto() {
        // executable_build_options { num_replicas: 1 num_partitions: 1 }
        assert_eq!(
            CompileOptions::new().to_bytes(),
            vec![0x1a, 0x04, 0x20, 0x01, 0x28, 0x01]
        );
    }

    #[test]
    fn client_options_replace_by_name() {
        let o = ClientOptions::new().cpu_device_count(2).cpu_device_count(3);
        assert_eq!(o.len(), 1);
        assert_eq!(o.values[0].1, super::super::NamedValue::Int64(3));
    }
}
