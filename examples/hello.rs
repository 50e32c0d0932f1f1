//! The smallest program: build `2x + 1`, run it, print the result.

use xlaclient::{Builder, Client, Shape};

fn main() -> xlaclient::Result<()> {
    let b = Builder::new("hello");
    let x = b.parameter(0, Shape::of::<f32>(&[4]), "x");
    let y = &x * 2.0 + 1.0;
    let module = b.build(&y)?;
    println!("{module}");
    let client = Client::cpu()?;
    println!(
        "plugin {} (PJRT C API {:?}), platform {} {}",
        client.plugin().path().display(),
        client.plugin().api_version(),
        client.platform_name()?,
        client.platform_version()?
    );
    for (k, v) in client.plugin().attributes()? {
        println!("  attribute {k} = {v}");
    }
    let exe = client.compile(&module)?;
    let input = client.buffer_from_host(&[1.0f32, 2.0, 3.0, 4.0], &[4])?;
    let out = exe.execute(&[&input])?;
    println!("{:?}", out[0].to_vec::<f32>()?);
    Ok(())
}
