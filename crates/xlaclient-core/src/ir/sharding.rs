//! An instruction's sharding: how an SPMD-partitioned program lays the value out
//! over its partitions (XLA's `HloSharding`, lowered to the `OpSharding` proto in an
//! instruction's field 40, printed as XLA prints it: `sharding={devices=[4,1]0,1,2,3}`).
//!
//! The IR holds the kinds that SPMD programs written here use: replicated, tiled
//! (optionally replicated over a last tile dimension) and tuples of those. A proto
//! sharding in XLA's compact "iota" form is expanded into the explicit device list
//! when read.

use std::fmt;

use crate::proto;
use crate::shape::Shape;

/// The layout of one value over the partitions of an SPMD program.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Sharding {
    /// Every partition holds the whole value (`{replicated}`).
    Replicated,
    /// The array is cut into tiles: `tile_dims[d]` pieces along array dimension
    /// `d`; with `replicate_last`, one more (last) entry counts the copies of each
    /// tile. `devices` lists the partition of each tile in row-major order of the
    /// tile grid (`tile_dims`' product entries).
    Tiled {
        /// Tiles per array dimension, then the copies per tile when
        /// `replicate_last`.
        tile_dims: Vec<i64>,
        /// The partition (logical device) holding each tile, row-major.
        devices: Vec<i64>,
        /// Whether the last entry of `tile_dims` counts copies, not an array axis
        /// (XLA's `last_tile_dim_replicate`).
        replicate_last: bool,
    },
    /// One sharding per element of a tuple-shaped value.
    Tuple(Vec<Sharding>),
}

impl Sharding {
    /// Checks that the sharding fits a value of shape `shape` (a tile grid of the
    /// array's rank, one device per tile, each device once; a tuple sharding per
    /// tuple element); `Err` says what is wrong.
    pub fn check(&self, shape: &Shape) -> Result<(), String> {
        match (self, shape) {
            (Sharding::Replicated, _) => Ok(()),
            (
                Sharding::Tiled {
                    tile_dims,
                    devices,
                    replicate_last,
                },
                Shape::Array { dims, .. },
            ) => {
                let rank = dims.len() + usize::from(*replicate_last);
                if tile_dims.len() != rank {
                    return Err(format!(
                        "a tiled sharding of {shape} needs {rank} tile dimensions, it has {} ({self})",
                        tile_dims.len()
                    ));
                }
                if tile_dims.is_empty() {
                    return Err(format!(
                        "a tiled sharding needs at least one tile dimension ({self}); a scalar is replicated"
                    ));
                }
                if tile_dims.iter().any(|t| *t < 1) {
                    return Err(format!("tile dimensions must be at least 1 ({self})"));
                }
                let n = tile_dims
                    .iter()
                    .try_fold(1i64, |a, t| a.checked_mul(*t))
                    .unwrap_or(i64::MAX);
                if n != devices.len() as i64 {
                    return Err(format!(
                        "a tile grid of {n} tiles needs {n} devices, it lists {} ({self})",
                        devices.len()
                    ));
                }
                let mut seen = devices.clone();
                seen.sort_unstable();
                if seen.first().is_some_and(|d| *d < 0) {
                    return Err(format!("negative device in {self}"));
                }
                if seen.windows(2).any(|w| w[0] == w[1]) {
                    return Err(format!("a device appears twice in {self}"));
                }
                Ok(())
            }
            (Sharding::Tiled { .. }, _) => Err(format!("a tiled sharding ({self}) on {shape}")),
            (Sharding::Tuple(s), Shape::Tuple(e)) if s.len() == e.len() => {
                s.iter().zip(e).try_for_each(|(s, e)| s.check(e))
            }
            (Sharding::Tuple(s), _) => Err(format!(
                "a tuple sharding of {} elements on {shape}",
                s.len()
            )),
        }
    }

    /// The largest device (partition) number it names, if any.
    pub fn max_device(&self) -> Option<i64> {
        match self {
            Sharding::Replicated => None,
            Sharding::Tiled { devices, .. } => devices.iter().copied().max(),
            Sharding::Tuple(s) => s.iter().filter_map(Sharding::max_device).max(),
        }
    }

    /// As XLA's `OpSharding` proto.
    pub fn to_proto(&self) -> proto::OpSharding {
        use proto::op_sharding::Type;
        match self {
            Sharding::Replicated => proto::OpSharding {
                r#type: Type::Replicated as i32,
                ..Default::default()
            },
            Sharding::Tiled {
                tile_dims,
                devices,
                replicate_last,
            } => proto::OpSharding {
                r#type: Type::Other as i32,
                tile_assignment_dimensions: tile_dims.clone(),
                tile_assignment_devices: devices.clone(),
                replicate_on_last_tile_dim: *replicate_last,
                ..Default::default()
            },
            Sharding::Tuple(s) => proto::OpSharding {
                r#type: Type::Tuple as i32,
                tuple_shardings: s.iter().map(Sharding::to_proto).collect(),
                ..Default::default()
            },
        }
    }

    /// Reads XLA's `OpSharding`: replicated, tiled (explicit devices or the iota
    /// form, with `replicate_on_last_tile_dim` or a single `last_tile_dims` entry
    /// REPLICATED) and tuples of those; `Err` names what this crate does not hold
    /// (maximal, manual, other subgroup kinds, shard groups).
    pub fn from_proto(p: &proto::OpSharding) -> Result<Sharding, String> {
        use proto::op_sharding::Type;
        if p.is_shard_group {
            return Err("shard groups are not supported".into());
        }
        match Type::try_from(p.r#type) {
            Ok(Type::Replicated) => Ok(Sharding::Replicated),
            Ok(Type::Tuple) => Ok(Sharding::Tuple(
                p.tuple_shardings
                    .iter()
                    .map(Sharding::from_proto)
                    .collect::<Result<_, _>>()?,
            )),
            Ok(Type::Other) => {
                let tile_dims = p.tile_assignment_dimensions.clone();
                let n = tile_dims
                    .iter()
                    .try_fold(1i64, |a, t| if *t < 1 { None } else { a.checked_mul(*t) })
                    .filter(|n| *n <= 1 << 24)
                    .ok_or_else(|| format!("bad tile assignment dimensions {tile_dims:?}"))?;
                let devices = if !p.iota_reshape_dims.is_empty() {
                    iota_devices(&p.iota_reshape_dims, &p.iota_transpose_perm, n)?
                } else {
                    p.tile_assignment_devices.clone()
                };
                let replicated = proto::op_sharding::Type::Replicated as i32;
                let replicate_last = match p.last_tile_dims.as_slice() {
                    [] => p.replicate_on_last_tile_dim,
                    [t] if *t == replicated && !p.replicate_on_last_tile_dim => true,
                    other => {
                        return Err(format!(
                            "last tile dimensions of kinds {other:?} are not supported (only one replicated)"
                        ));
                    }
                };
                Ok(Sharding::Tiled {
                    tile_dims,
                    devices,
                    replicate_last,
                })
            }
            Ok(t) => Err(format!("sharding kind {t:?} is not supported")),
            Err(_) => Err(format!("unknown sharding kind {}", p.r#type)),
        }
    }
}

/// The devices of XLA's iota tile assignment: `0..n` reshaped to `reshape`,
/// transposed by `perm`, flattened.
fn iota_devices(reshape: &[i64], perm: &[i32], n: i64) -> Result<Vec<i64>, String> {
    let bad = || format!("bad iota tile assignment: reshape {reshape:?}, transpose {perm:?}");
    if reshape.iter().any(|d| *d < 1) || reshape.iter().product::<i64>() != n {
        return Err(bad());
    }
    let r = reshape.len();
    let perm: Vec<usize> = if perm.is_empty() {
        (0..r).collect()
    } else {
        perm.iter().map(|p| *p as usize).collect()
    };
    let mut sorted = perm.clone();
    sorted.sort_unstable();
    if sorted != (0..r).collect::<Vec<_>>() {
        return Err(bad());
    }
    // Row-major strides of the reshaped iota.
    let mut stride = vec![1i64; r];
    for d in (0..r.saturating_sub(1)).rev() {
        stride[d] = stride[d + 1] * reshape[d + 1];
    }
    let out_dims: Vec<i64> = perm.iter().map(|p| reshape[*p]).collect();
    let mut idx = vec![0i64; r];
    let mut out = Vec::with_capacity(n as usize);
    for _ in 0..n {
        out.push((0..r).map(|k| idx[k] * stride[perm[k]]).sum());
        for k in (0..r).rev() {
            idx[k] += 1;
            if idx[k] < out_dims[k] {
                break;
            }
            idx[k] = 0;
        }
    }
    Ok(out)
}

/// As XLA prints it: `{replicated}`, `{devices=[2,1]0,1}`,
/// `{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}`, `{{replicated}, {…}}`.
impl fmt::Display for Sharding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let join = |v: &[i64]| v.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
        match self {
            Sharding::Replicated => f.write_str("{replicated}"),
            Sharding::Tiled {
                tile_dims,
                devices,
                replicate_last,
            } => {
                write!(f, "{{devices=[{}]{}", join(tile_dims), join(devices))?;
                if *replicate_last {
                    f.write_str(" last_tile_dim_replicate")?;
                }
                f.write_str("}")
            }
            Sharding::Tuple(s) => {
                f.write_str("{")?;
                for (i, e) in s.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{e}")?;
                }
                f.write_str("}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iota_expands_as_xla_defines_it() {
        // [4,2] iota transposed (1,0): 0,2,4,6,1,3,5,7.
        assert_eq!(
            iota_devices(&[4, 2], &[1, 0], 8).unwrap(),
            [0, 2, 4, 6, 1, 3, 5, 7]
        );
        assert_eq!(iota_devices(&[4], &[], 4).unwrap(), [0, 1, 2, 3]);
        assert!(iota_devices(&[3], &[], 4).is_err());
        assert!(iota_devices(&[2, 2], &[0, 0], 4).is_err());
    }

    #[test]
    fn text_and_proto_round_trip() {
        let s = Sharding::Tuple(vec![
            Sharding::Replicated,
            Sharding::Tiled {
                tile_dims: vec![2, 1, 2],
                devices: vec![0, 2, 1, 3],
                replicate_last: true,
            },
        ]);
        assert_eq!(
            s.to_string(),
            "{{replicated}, {devices=[2,1,2]0,2,1,3 last_tile_dim_replicate}}"
        );
        assert_eq!(Sharding::from_proto(&s.to_proto()).unwrap(), s);
        let f32x = |d: &[i64]| Shape::of::<f32>(d);
        assert!(
            s.check(&Shape::Tuple(vec![f32x(&[3]), f32x(&[4, 5])]))
                .is_ok()
        );
        assert!(s.check(&f32x(&[4, 5])).is_err());
        let t = Sharding::Tiled {
            tile_dims: vec![2, 2],
            devices: vec![0, 1, 1, 2],
            replicate_last: false,
        };
        assert!(t.check(&f32x(&[4, 4])).unwrap_err().contains("twice"));
        assert!(t.check(&f32x(&[4])).unwrap_err().contains("needs 1 tile"));
        let scalar = Sharding::Tiled {
            tile_dims: vec![],
            devices: vec![0],
            replicate_last: false,
        };
        assert!(scalar.check(&f32x(&[])).unwrap_err().contains("replicated"));
        let copies = Sharding::Tiled {
            tile_dims: vec![4],
            devices: vec![0, 1, 2, 3],
            replicate_last: true,
        };
        assert!(copies.check(&f32x(&[])).is_ok());
    }
}
