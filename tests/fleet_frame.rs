//! The fleet's wire format: round trips, chunking, and a decoder that turns every
//! malformed, truncated or foreign frame into an error naming what was wrong
//! (property-tested with mutations and cuts), never a panic.

use proptest::prelude::*;
use xlaclient::fleet::catch::{self, Sequence};
use xlaclient::fleet::frame::{
    self, Dtype, FrameError, HEADER_LEN, Kind, Leaf, MAX_CHUNK, Message, Reassembler,
};

fn message(seed: u64, n: usize) -> Message {
    let vals: Vec<f32> = (0..n)
        .map(|i| (i as f32 + seed as f32) * 0.25 - 3.0)
        .collect();
    let ints: Vec<i32> = (0..n as i32).map(|i| i * 7 - 11).collect();
    Message {
        kind: Kind::Trajectory,
        actor: 3,
        epoch: 0xDEAD_BEEF_0000 + seed,
        seq: 42 + seed,
        version: 9,
        leaves: vec![
            Leaf::f32(&[n as u64], &vals).unwrap(),
            Leaf::i32(&[1, n as u64, 1], &ints).unwrap(),
            Leaf::f32(&[], &[1.5]).unwrap(),
        ],
    }
}

#[test]
fn round_trip_single_frame() {
    let m = message(1, 100);
    let frames = frame::encode(&m, MAX_CHUNK).unwrap();
    assert_eq!(frames.len(), 1);
    // Header + leaf count + 3 × (dtype, rank, dims, bytes).
    let body = 4 + (2 + 8 + 400) + (2 + 24 + 400) + (2 + 4);
    assert_eq!(frames[0].len(), HEADER_LEN + body);
    let back = frame::decode(&frames[0]).unwrap();
    assert_eq!(back, m);
    // The raw bytes are the little-endian values: read independently.
    assert_eq!(
        back.leaves[0].to_f32().unwrap()[5],
        (5.0 + 1.0) * 0.25 - 3.0
    );
    assert_eq!(&frames[0][..4], b"XLFT");
}

#[test]
fn chunks_of_at_most_max_frame_reassemble_in_any_order() {
    let m = message(2, 300_000); // 2.4 MB of leaves: three 1 MiB chunks.
    let frames = frame::encode(&m, MAX_CHUNK).unwrap();
    assert_eq!(frames.len(), 3);
    assert!(frames.iter().all(|f| f.len() <= MAX_CHUNK));
    let mut r = Reassembler::new();
    assert_eq!(r.push(&frames[2]).unwrap(), None);
    assert_eq!(r.push(&frames[0]).unwrap(), None);
    assert_eq!(r.pending(), 1);
    assert_eq!(r.push(&frames[1]).unwrap(), Some(m.clone()));
    assert_eq!(r.pending(), 0);
    // A single chunk is refused by `decode`, which wants whole messages.
    assert!(matches!(
        frame::decode(&frames[0]),
        Err(FrameError::Chunk { index: 0, count: 3 })
    ));
    // Small frames: many chunks.
    let small = frame::encode(&message(3, 50), HEADER_LEN + 64).unwrap();
    assert!(small.len() > 5);
    let mut r = Reassembler::new();
    let mut out = None;
    for f in small.iter().rev() {
        assert!(f.len() <= HEADER_LEN + 64);
        out = r.push(f).unwrap();
    }
    assert_eq!(out, Some(message(3, 50)));
}

#[test]
fn named_errors() {
    let f = frame::encode(&message(4, 10), MAX_CHUNK).unwrap().remove(0);
    let e = frame::decode(b"{\"json\": true, \"padding\": \"..............................\"}")
        .unwrap_err();
    assert!(matches!(e, FrameError::Magic { .. }), "{e}");
    assert!(e.to_string().contains("foreign message"), "{e}");
    let e = frame::decode(&f[..20]).unwrap_err();
    assert_eq!(e, FrameError::Short { len: 20 });
    assert!(e.to_string().contains("truncated"));
    let e = frame::decode(&f[..f.len() - 3]).unwrap_err();
    assert!(matches!(e, FrameError::PayloadLength { .. }), "{e}");
    let mut g = f.clone();
    g[4] = 2;
    assert_eq!(
        frame::decode(&g).unwrap_err(),
        FrameError::Version { found: 2 }
    );
    let mut g = f.clone();
    g[6] = 9;
    assert_eq!(
        frame::decode(&g).unwrap_err(),
        FrameError::Kind { found: 9 }
    );
    let mut g = f.clone();
    g[HEADER_LEN + 4] = 7; // the first leaf's dtype
    assert_eq!(
        frame::decode(&g).unwrap_err(),
        FrameError::Dtype { leaf: 0, code: 7 }
    );
    // A body whose leaf claims more elements than the frame holds.
    let mut g = f.clone();
    g[HEADER_LEN + 6] = 200; // first dim 10 -> 200
    let e = frame::decode(&g).unwrap_err();
    assert!(
        matches!(
            e,
            FrameError::BodyTruncated {
                what: "a leaf's elements",
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn trajectory_layout_is_checked() {
    let seqs: Vec<Sequence> = (0..4)
        .map(|i| Sequence {
            obs: vec![0.0; (catch::T + 1) * catch::OBS],
            actions: vec![i % 3; catch::T],
            rewards: vec![0.0; catch::T],
            discounts: vec![1.0; catch::T],
        })
        .collect();
    let m = catch::trajectory_message(1, 2, 3, 4, &seqs).unwrap();
    assert_eq!(catch::sequences_of(&m).unwrap(), seqs);
    let mut bad = m.clone();
    bad.leaves[1] = Leaf::i32(&[4, catch::T as u64], &vec![5; 4 * catch::T]).unwrap();
    let e = catch::sequences_of(&bad).unwrap_err().to_string();
    assert!(e.contains("action 5 outside 0..3"), "{e}");
    let mut bad = m.clone();
    bad.leaves.pop();
    let e = catch::sequences_of(&bad).unwrap_err().to_string();
    assert!(e.contains("3 arrays, expected 4"), "{e}");
    let mut bad = m;
    bad.leaves[2] = Leaf::i32(&[4, catch::T as u64], &vec![0; 4 * catch::T]).unwrap();
    let e = catch::sequences_of(&bad).unwrap_err().to_string();
    assert!(e.contains("rewards is I32"), "{e}");
    assert_eq!(Dtype::F32.size(), 4);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Any byte changed, cut or appended: an error or a message (a change inside
    /// the values decodes), never a panic; every decoded message re-encodes to
    /// the same bytes.
    #[test]
    fn mutated_frames_never_panic(
        n in 0usize..40,
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..6),
        cut in proptest::option::of(any::<usize>()),
        extra in proptest::collection::vec(any::<u8>(), 0..4),
    ) {
        let mut f = frame::encode(&message(5, n), MAX_CHUNK).unwrap().remove(0);
        for (at, b) in flips {
            let k = at % f.len();
            f[k] = b;
        }
        if let Some(c) = cut {
            f.truncate(c % (f.len() + 1));
        }
        f.extend(extra);
        match frame::decode(&f) {
            Ok(m) => {
                let again = frame::encode(&m, MAX_CHUNK).unwrap();
                prop_assert_eq!(&again[0], &f);
            }
            Err(e) => prop_assert!(!e.to_string().is_empty()),
        }
        let mut r = Reassembler::new();
        let _ = r.push(&f);
    }

    /// Arbitrary bytes: never a panic.
    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = frame::decode(&bytes);
        let _ = frame::decode_body(&bytes);
    }
}
