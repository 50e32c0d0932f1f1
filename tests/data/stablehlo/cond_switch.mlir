module @jit_cond_switch attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<i32>, %arg1: tensor<4xf32>) -> (tensor<4xf32> {jax.result_info = "result[0]"}, tensor<4xf32> {jax.result_info = "result[1]"}) {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.reduce(%arg1 init: %cst) applies stablehlo.add across dimensions = [0] : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
    %cst_0 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %1 = stablehlo.compare GT, %0, %cst_0, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %2 = stablehlo.convert %1 : (tensor<i1>) -> tensor<i32>
    %3 = "stablehlo.case"(%2) ({
      %6 = stablehlo.negate %arg1 : tensor<4xf32>
      stablehlo.return %6 : tensor<4xf32>
    }, {
      %cst_2 = stablehlo.constant dense<2.000000e+00> : tensor<f32>
      %6 = stablehlo.broadcast_in_dim %cst_2, dims = [] : (tensor<f32>) -> tensor<4xf32>
      %7 = stablehlo.multiply %arg1, %6 : tensor<4xf32>
      stablehlo.return %7 : tensor<4xf32>
    }) : (tensor<i32>) -> tensor<4xf32>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_1 = stablehlo.constant dense<2> : tensor<i32>
    %4 = stablehlo.clamp %c, %arg0, %c_1 : tensor<i32>
    %5 = "stablehlo.case"(%4) ({
      %6 = stablehlo.sine %arg1 : tensor<4xf32>
      stablehlo.return %6 : tensor<4xf32>
    }, {
      %6 = stablehlo.cosine %arg1 : tensor<4xf32>
      stablehlo.return %6 : tensor<4xf32>
    }, {
      %6 = stablehlo.exponential %arg1 : tensor<4xf32>
      stablehlo.return %6 : tensor<4xf32>
    }) : (tensor<i32>) -> tensor<4xf32>
    return %3, %5 : tensor<4xf32>, tensor<4xf32>
  }
}
