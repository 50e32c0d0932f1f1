module @jit_flat attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<16xf32>, %arg1: tensor<3xf32>, %arg2: tensor<50x16xf32>, %arg3: tensor<16x3xf32>, %arg4: tensor<i32>, %arg5: tensor<16xf32>, %arg6: tensor<3xf32>, %arg7: tensor<50x16xf32>, %arg8: tensor<16x3xf32>, %arg9: tensor<16xf32>, %arg10: tensor<3xf32>, %arg11: tensor<50x16xf32>, %arg12: tensor<16x3xf32>, %arg13: tensor<2x2xui32>, %arg14: tensor<2x4xi32>) -> (tensor<16xf32> {jax.result_info = "result[0]['b1']"}, tensor<3xf32> {jax.result_info = "result[0]['b2']"}, tensor<50x16xf32> {jax.result_info = "result[0]['w1']"}, tensor<16x3xf32> {jax.result_info = "result[0]['w2']"}, tensor<i32> {jax.result_info = "result[1]['count']"}, tensor<16xf32> {jax.result_info = "result[1]['mu']['b1']"}, tensor<3xf32> {jax.result_info = "result[1]['mu']['b2']"}, tensor<50x16xf32> {jax.result_info = "result[1]['mu']['w1']"}, tensor<16x3xf32> {jax.result_info = "result[1]['mu']['w2']"}, tensor<16xf32> {jax.result_info = "result[1]['nu']['b1']"}, tensor<3xf32> {jax.result_info = "result[1]['nu']['b2']"}, tensor<50x16xf32> {jax.result_info = "result[1]['nu']['w1']"}, tensor<16x3xf32> {jax.result_info = "result[1]['nu']['w2']"}, tensor<2x2xui32> {jax.result_info = "result[2]"}, tensor<2x4xi32> {jax.result_info = "result[3]"}) {
    %c = stablehlo.constant dense<[[0, 0, 0, 0, 0], [1, 1, 1, 1, 1], [2, 2, 2, 2, 2], [3, 3, 3, 3, 3], [4, 4, 4, 4, 4], [5, 5, 5, 5, 5], [6, 6, 6, 6, 6], [7, 7, 7, 7, 7], [8, 8, 8, 8, 8], [9, 9, 9, 9, 9]]> : tensor<10x5xi32>
    %c_0 = stablehlo.constant dense<[[0, 1, 2, 3, 4], [0, 1, 2, 3, 4], [0, 1, 2, 3, 4], [0, 1, 2, 3, 4], [0, 1, 2, 3, 4], [0, 1, 2, 3, 4], [0, 1, 2, 3, 4], [0, 1, 2, 3, 4], [0, 1, 2, 3, 4], [0, 1, 2, 3, 4]]> : tensor<10x5xi32>
    %c_1 = stablehlo.constant dense<0> : tensor<i32>
    %0:18 = stablehlo.while(%iterArg = %c, %iterArg_2 = %c_0, %iterArg_3 = %c_1, %iterArg_4 = %arg0, %iterArg_5 = %arg1, %iterArg_6 = %arg2, %iterArg_7 = %arg3, %iterArg_8 = %arg4, %iterArg_9 = %arg5, %iterArg_10 = %arg6, %iterArg_11 = %arg7, %iterArg_12 = %arg8, %iterArg_13 = %arg9, %iterArg_14 = %arg10, %iterArg_15 = %arg11, %iterArg_16 = %arg12, %iterArg_17 = %arg13, %iterArg_18 = %arg14) : tensor<10x5xi32>, tensor<10x5xi32>, tensor<i32>, tensor<16xf32>, tensor<3xf32>, tensor<50x16xf32>, tensor<16x3xf32>, tensor<i32>, tensor<16xf32>, tensor<3xf32>, tensor<50x16xf32>, tensor<16x3xf32>, tensor<16xf32>, tensor<3xf32>, tensor<50x16xf32>, tensor<16x3xf32>, tensor<2x2xui32>, tensor<2x4xi32>
    cond {
      %c_19 = stablehlo.constant dense<1> : tensor<i32>
      %1 = stablehlo.compare LT, %iterArg_3, %c_19, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %1 : tensor<i1>
    } do {
      %1:15 = func.call @closed_call(%iterArg, %iterArg_2, %iterArg_4, %iterArg_5, %iterArg_6, %iterArg_7, %iterArg_8, %iterArg_9, %iterArg_10, %iterArg_11, %iterArg_12, %iterArg_13, %iterArg_14, %iterArg_15, %iterArg_16, %iterArg_17, %iterArg_18) : (tensor<10x5xi32>, tensor<10x5xi32>, tensor<16xf32>, tensor<3xf32>, tensor<50x16xf32>, tensor<16x3xf32>, tensor<i32>, tensor<16xf32>, tensor<3xf32>, tensor<50x16xf32>, tensor<16x3xf32>, tensor<16xf32>, tensor<3xf32>, tensor<50x16xf32>, tensor<16x3xf32>, tensor<2x2xui32>, tensor<2x4xi32>) -> (tensor<16xf32>, tensor<3xf32>, tensor<50x16xf32>, tensor<16x3xf32>, tensor<i32>, tensor<16xf32>, tensor<3xf32>, tensor<50x16xf32>, tensor<16x3xf32>, tensor<16xf32>, tensor<3xf32>, tensor<50x16xf32>, tensor<16x3xf32>, tensor<2x2xui32>, tensor<2x4xi32>)
      %c_19 = stablehlo.constant dense<1> : tensor<i32>
      %2 = stablehlo.add %iterArg_3, %c_19 : tensor<i32>
      stablehlo.return %iterArg, %iterArg_2, %2, %1#0, %1#1, %1#2, %1#3, %1#4, %1#5, %1#6, %1#7, %1#8, %1#9, %1#10, %1#11, %1#12, %1#13, %1#14 : tensor<10x5xi32>, tensor<10x5xi32>, tensor<i32>, tensor<16xf32>, tensor<3xf32>, tensor<50x16xf32>, tensor<16x3xf32>, tensor<i32>, tensor<16xf32>, tensor<3xf32>, tensor<50x16xf32>, tensor<16x3xf32>, tensor<16xf32>, tensor<3xf32>, tensor<50x16xf32>, tensor<16x3xf32>, tensor<2x2xui32>, tensor<2x4xi32>
    }
    return %0#3, %0#4, %0#5, %0#6, %0#7, %0#8, %0#9, %0#10, %0#11, %0#12, %0#13, %0#14, %0#15, %0#16, %0#17 : tensor<16xf32>, tensor<3xf32>, tensor<50x16xf32>, tensor<16x3xf32>, tensor<i32>, tensor<16xf32>, tensor<3xf32>, tensor<50x16xf32>, tensor<16x3xf32>, tensor<16xf32>, tensor<3xf32>, tensor<50x16xf32>, tensor<16x3xf32>, tensor<2x2xui32>, tensor<2x4xi32>
  }
  func.func private @closed_call(%arg0: tensor<10x5xi32>, %arg1: tensor<10x5xi32>, %arg2: tensor<16xf32>, %arg3: tensor<3xf32>, %arg4: tensor<50x16xf32>, %arg5: tensor<16x3xf32>, %arg6: tensor<i32>, %arg7: tensor<16xf32>, %arg8: tensor<3xf32>, %arg9: tensor<50x16xf32>, %arg10: tensor<16x3xf32>, %arg11: tensor<16xf32>, %arg12: tensor<3xf32>, %arg13: tensor<50x16xf32>, %arg14: tensor<16x3xf32>, %arg15: tensor<2x2xui32>, %arg16: tensor<2x4xi32>) -> (tensor<16xf32>, tensor<3xf32>, tensor<50x16xf32>, tensor<16x3xf32>, tensor<i32>, tensor<16xf32>, tensor<3xf32>, tensor<50x16xf32>, tensor<16x3xf32>, tensor<16xf32>, tensor<3xf32>, tensor<50x16xf32>, tensor<16x3xf32>, tensor<2x2xui32>, tensor<2x4xi32>) {
    %0 = call @_threefry_split(%arg15) : (tensor<2x2xui32>) -> tensor<2x2x2xui32>
    %1 = stablehlo.slice %0 [0:2, 0:1, 0:2] : (tensor<2x2x2xui32>) -> tensor<2x1x2xui32>
    %2 = stablehlo.slice %0 [0:2, 1:2, 0:2] : (tensor<2x2x2xui32>) -> tensor<2x1x2xui32>
    %3 = stablehlo.reshape %2 : (tensor<2x1x2xui32>) -> tensor<2x2xui32>
    %4 = call @_threefry_split_1(%3) : (tensor<2x2xui32>) -> tensor<2x4x2xui32>
    %5 = stablehlo.transpose %4, dims = [1, 0, 2] : (tensor<2x4x2xui32>) -> tensor<4x2x2xui32>
    %6 = stablehlo.broadcast_in_dim %arg0, dims = [1, 2] : (tensor<10x5xi32>) -> tensor<1x10x5xi32>
    %7 = stablehlo.broadcast_in_dim %arg1, dims = [1, 2] : (tensor<10x5xi32>) -> tensor<1x10x5xi32>
    %8 = stablehlo.broadcast_in_dim %arg0, dims = [1, 2] : (tensor<10x5xi32>) -> tensor<1x10x5xi32>
    %9 = stablehlo.broadcast_in_dim %arg1, dims = [1, 2] : (tensor<10x5xi32>) -> tensor<1x10x5xi32>
    %10 = stablehlo.broadcast_in_dim %arg2, dims = [1] : (tensor<16xf32>) -> tensor<1x16xf32>
    %11 = stablehlo.broadcast_in_dim %arg3, dims = [1] : (tensor<3xf32>) -> tensor<1x3xf32>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_0 = stablehlo.constant dense<4> : tensor<i32>
    %12:2 = call @clip(%c, %c_0) : (tensor<i32>, tensor<i32>) -> (tensor<i32>, tensor<i32>)
    %cst = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %cst_1 = stablehlo.constant dense<-1.000000e+00> : tensor<f32>
    %13:2 = call @_where(%cst, %cst_1) : (tensor<f32>, tensor<f32>) -> (tensor<2xf32>, tensor<2xf32>)
    %cst_2 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %14 = call @_where_4(%cst_2) : (tensor<f32>) -> tensor<2xf32>
    %cst_3 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %cst_4 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %15:2 = call @_where(%cst_3, %cst_4) : (tensor<f32>, tensor<f32>) -> (tensor<2xf32>, tensor<2xf32>)
    %c_5 = stablehlo.constant dense<0> : tensor<i32>
    %c_6 = stablehlo.constant dense<5> : tensor<i32>
    %16:3 = call @_randint(%c_5, %c_6) : (tensor<i32>, tensor<i32>) -> (tensor<i32>, tensor<ui32>, tensor<ui32>)
    %c_7 = stablehlo.constant dense<0> : tensor<i32>
    %17 = stablehlo.broadcast_in_dim %c_7, dims = [] : (tensor<i32>) -> tensor<2xi32>
    %c_8 = stablehlo.constant dense<9> : tensor<i32>
    %18 = stablehlo.broadcast_in_dim %c_8, dims = [] : (tensor<i32>) -> tensor<2xi32>
    %c_9 = stablehlo.constant dense<2> : tensor<i32>
    %19 = stablehlo.broadcast_in_dim %c_9, dims = [] : (tensor<i32>) -> tensor<2xi32>
    %cst_10 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %20 = stablehlo.broadcast_in_dim %cst_10, dims = [] : (tensor<f32>) -> tensor<4x2x3xf32>
    %c_11 = stablehlo.constant dense<0> : tensor<i32>
    %21 = stablehlo.broadcast_in_dim %c_11, dims = [] : (tensor<i32>) -> tensor<4x2xi32>
    %cst_12 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %22 = stablehlo.broadcast_in_dim %cst_12, dims = [] : (tensor<f32>) -> tensor<4x2xf32>
    %cst_13 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %23 = stablehlo.broadcast_in_dim %cst_13, dims = [] : (tensor<f32>) -> tensor<4x2xf32>
    %cst_14 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %24 = stablehlo.broadcast_in_dim %cst_14, dims = [] : (tensor<f32>) -> tensor<4x2x50xf32>
    %c_15 = stablehlo.constant dense<false> : tensor<i1>
    %25 = stablehlo.broadcast_in_dim %c_15, dims = [] : (tensor<i1>) -> tensor<4x2x16xi1>
    %cst_16 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %26 = stablehlo.broadcast_in_dim %cst_16, dims = [] : (tensor<f32>) -> tensor<4x2x16xf32>
    %c_17 = stablehlo.constant dense<0> : tensor<i32>
    %27:31 = stablehlo.while(%iterArg = %5, %iterArg_61 = %17, %iterArg_62 = %16#0, %iterArg_63 = %16#1, %iterArg_64 = %16#2, %iterArg_65 = %18, %iterArg_66 = %19, %iterArg_67 = %6, %iterArg_68 = %7, %iterArg_69 = %8, %iterArg_70 = %9, %iterArg_71 = %arg4, %iterArg_72 = %10, %iterArg_73 = %arg5, %iterArg_74 = %11, %iterArg_75 = %12#0, %iterArg_76 = %12#1, %iterArg_77 = %13#0, %iterArg_78 = %13#1, %iterArg_79 = %14, %iterArg_80 = %15#0, %iterArg_81 = %15#1, %iterArg_82 = %c_17, %iterArg_83 = %arg16, %iterArg_84 = %20, %iterArg_85 = %21, %iterArg_86 = %22, %iterArg_87 = %23, %iterArg_88 = %24, %iterArg_89 = %25, %iterArg_90 = %26) : tensor<4x2x2xui32>, tensor<2xi32>, tensor<i32>, tensor<ui32>, tensor<ui32>, tensor<2xi32>, tensor<2xi32>, tensor<1x10x5xi32>, tensor<1x10x5xi32>, tensor<1x10x5xi32>, tensor<1x10x5xi32>, tensor<50x16xf32>, tensor<1x16xf32>, tensor<16x3xf32>, tensor<1x3xf32>, tensor<i32>, tensor<i32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<i32>, tensor<2x4xi32>, tensor<4x2x3xf32>, tensor<4x2xi32>, tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2x50xf32>, tensor<4x2x16xi1>, tensor<4x2x16xf32>
    cond {
      %c_91 = stablehlo.constant dense<4> : tensor<i32>
      %160 = stablehlo.compare LT, %iterArg_82, %c_91, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %160 : tensor<i1>
    } do {
      %160 = func.call @dynamic_index_in_dim(%iterArg, %iterArg_82) : (tensor<4x2x2xui32>, tensor<i32>) -> tensor<2x2xui32>
      %161:8 = func.call @closed_call_7(%iterArg_61, %iterArg_62, %iterArg_63, %iterArg_64, %iterArg_65, %iterArg_66, %iterArg_67, %iterArg_68, %iterArg_69, %iterArg_70, %iterArg_71, %iterArg_72, %iterArg_73, %iterArg_74, %iterArg_75, %iterArg_76, %iterArg_77, %iterArg_78, %iterArg_79, %iterArg_80, %iterArg_81, %iterArg_83, %160) : (tensor<2xi32>, tensor<i32>, tensor<ui32>, tensor<ui32>, tensor<2xi32>, tensor<2xi32>, tensor<1x10x5xi32>, tensor<1x10x5xi32>, tensor<1x10x5xi32>, tensor<1x10x5xi32>, tensor<50x16xf32>, tensor<1x16xf32>, tensor<16x3xf32>, tensor<1x3xf32>, tensor<i32>, tensor<i32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2x4xi32>, tensor<2x2xui32>) -> (tensor<2x4xi32>, tensor<2x3xf32>, tensor<2xi32>, tensor<2xf32>, tensor<2xf32>, tensor<2x50xf32>, tensor<2x16xi1>, tensor<2x16xf32>)
      %162 = func.call @dynamic_update_index_in_dim(%iterArg_84, %161#1, %iterArg_82) : (tensor<4x2x3xf32>, tensor<2x3xf32>, tensor<i32>) -> tensor<4x2x3xf32>
      %163 = func.call @dynamic_update_index_in_dim_18(%iterArg_85, %161#2, %iterArg_82) : (tensor<4x2xi32>, tensor<2xi32>, tensor<i32>) -> tensor<4x2xi32>
      %164 = func.call @dynamic_update_index_in_dim_19(%iterArg_86, %161#3, %iterArg_82) : (tensor<4x2xf32>, tensor<2xf32>, tensor<i32>) -> tensor<4x2xf32>
      %165 = func.call @dynamic_update_index_in_dim_19(%iterArg_87, %161#4, %iterArg_82) : (tensor<4x2xf32>, tensor<2xf32>, tensor<i32>) -> tensor<4x2xf32>
      %166 = func.call @dynamic_update_index_in_dim_20(%iterArg_88, %161#5, %iterArg_82) : (tensor<4x2x50xf32>, tensor<2x50xf32>, tensor<i32>) -> tensor<4x2x50xf32>
      %167 = func.call @dynamic_update_index_in_dim_21(%iterArg_89, %161#6, %iterArg_82) : (tensor<4x2x16xi1>, tensor<2x16xi1>, tensor<i32>) -> tensor<4x2x16xi1>
      %168 = func.call @dynamic_update_index_in_dim_22(%iterArg_90, %161#7, %iterArg_82) : (tensor<4x2x16xf32>, tensor<2x16xf32>, tensor<i32>) -> tensor<4x2x16xf32>
      %c_91 = stablehlo.constant dense<1> : tensor<i32>
      %169 = stablehlo.add %iterArg_82, %c_91 : tensor<i32>
      stablehlo.return %iterArg, %iterArg_61, %iterArg_62, %iterArg_63, %iterArg_64, %iterArg_65, %iterArg_66, %iterArg_67, %iterArg_68, %iterArg_69, %iterArg_70, %iterArg_71, %iterArg_72, %iterArg_73, %iterArg_74, %iterArg_75, %iterArg_76, %iterArg_77, %iterArg_78, %iterArg_79, %iterArg_80, %iterArg_81, %169, %161#0, %162, %163, %164, %165, %166, %167, %168 : tensor<4x2x2xui32>, tensor<2xi32>, tensor<i32>, tensor<ui32>, tensor<ui32>, tensor<2xi32>, tensor<2xi32>, tensor<1x10x5xi32>, tensor<1x10x5xi32>, tensor<1x10x5xi32>, tensor<1x10x5xi32>, tensor<50x16xf32>, tensor<1x16xf32>, tensor<16x3xf32>, tensor<1x3xf32>, tensor<i32>, tensor<i32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<i32>, tensor<2x4xi32>, tensor<4x2x3xf32>, tensor<4x2xi32>, tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2x50xf32>, tensor<4x2x16xi1>, tensor<4x2x16xf32>
    }
    %28 = stablehlo.slice %27#24 [0:3, 0:2, 0:3] : (tensor<4x2x3xf32>) -> tensor<3x2x3xf32>
    %29 = stablehlo.slice %27#25 [0:3, 0:2] : (tensor<4x2xi32>) -> tensor<3x2xi32>
    %30 = stablehlo.transpose %29, dims = [1, 0] : (tensor<3x2xi32>) -> tensor<2x3xi32>
    %31 = stablehlo.broadcast_in_dim %30, dims = [0, 1] : (tensor<2x3xi32>) -> tensor<2x3x1xi32>
    %32:2 = call @take_along_axis(%28, %31) : (tensor<3x2x3xf32>, tensor<2x3x1xi32>) -> (tensor<2x3x1xf32>, tensor<2x3x1x1xi32>)
    %33 = stablehlo.reshape %32#0 : (tensor<2x3x1xf32>) -> tensor<2x3xf32>
    %34 = stablehlo.slice %27#26 [0:3, 0:2] : (tensor<4x2xf32>) -> tensor<3x2xf32>
    %35 = stablehlo.slice %27#27 [0:3, 0:2] : (tensor<4x2xf32>) -> tensor<3x2xf32>
    %cst_18 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %36 = stablehlo.broadcast_in_dim %cst_18, dims = [] : (tensor<f32>) -> tensor<3x2xf32>
    %37 = stablehlo.multiply %36, %35 : tensor<3x2xf32>
    %38 = stablehlo.slice %27#24 [1:4, 0:2, 0:3] : (tensor<4x2x3xf32>) -> tensor<3x2x3xf32>
    %cst_19 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %39 = stablehlo.reduce(%38 init: %cst_19) applies stablehlo.maximum across dimensions = [2] : (tensor<3x2x3xf32>, tensor<f32>) -> tensor<3x2xf32>
    %40 = stablehlo.slice %39 [2:3, 0:2] : (tensor<3x2xf32>) -> tensor<1x2xf32>
    %41 = stablehlo.transpose %40, dims = [1, 0] : (tensor<1x2xf32>) -> tensor<2x1xf32>
    %42 = stablehlo.reshape %41 : (tensor<2x1xf32>) -> tensor<2xf32>
    %cst_20 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %43 = stablehlo.broadcast_in_dim %cst_20, dims = [] : (tensor<f32>) -> tensor<3x2xf32>
    %c_21 = stablehlo.constant dense<0> : tensor<i32>
    %44:6 = stablehlo.while(%iterArg = %34, %iterArg_61 = %37, %iterArg_62 = %39, %iterArg_63 = %c_21, %iterArg_64 = %42, %iterArg_65 = %43) : tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x2xf32>, tensor<i32>, tensor<2xf32>, tensor<3x2xf32>
    cond {
      %c_66 = stablehlo.constant dense<3> : tensor<i32>
      %160 = stablehlo.compare LT, %iterArg_63, %c_66, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %160 : tensor<i1>
    } do {
      %c_66 = stablehlo.constant dense<3> : tensor<i32>
      %160 = stablehlo.subtract %c_66, %iterArg_63 : tensor<i32>
      %c_67 = stablehlo.constant dense<1> : tensor<i32>
      %161 = stablehlo.subtract %160, %c_67 : tensor<i32>
      %162 = func.call @dynamic_index_in_dim_23(%iterArg, %161) : (tensor<3x2xf32>, tensor<i32>) -> tensor<2xf32>
      %163 = func.call @dynamic_index_in_dim_23(%iterArg_61, %161) : (tensor<3x2xf32>, tensor<i32>) -> tensor<2xf32>
      %164 = func.call @dynamic_index_in_dim_24(%iterArg_62, %161) : (tensor<3x2xf32>, tensor<i32>) -> tensor<2xf32>
      %165:2 = func.call @closed_call_25(%iterArg_64, %162, %163, %164) : (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>)
      %166 = func.call @dynamic_update_index_in_dim_26(%iterArg_65, %165#1, %161) : (tensor<3x2xf32>, tensor<2xf32>, tensor<i32>) -> tensor<3x2xf32>
      %c_68 = stablehlo.constant dense<1> : tensor<i32>
      %167 = stablehlo.add %iterArg_63, %c_68 : tensor<i32>
      stablehlo.return %iterArg, %iterArg_61, %iterArg_62, %167, %165#0, %166 : tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x2xf32>, tensor<i32>, tensor<2xf32>, tensor<3x2xf32>
    }
    %45 = stablehlo.transpose %44#5, dims = [1, 0] : (tensor<3x2xf32>) -> tensor<2x3xf32>
    %46 = stablehlo.subtract %45, %33 : tensor<2x3xf32>
    %cst_22 = stablehlo.constant dense<2.000000e+00> : tensor<f32>
    %47 = stablehlo.broadcast_in_dim %cst_22, dims = [] : (tensor<f32>) -> tensor<2x3xf32>
    %48 = stablehlo.multiply %47, %46 : tensor<2x3xf32>
    %cst_23 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %cst_24 = stablehlo.constant dense<2.000000e+00> : tensor<f32>
    %49 = stablehlo.divide %cst_23, %cst_24 : tensor<f32>
    %50 = stablehlo.broadcast_in_dim %49, dims = [] : (tensor<f32>) -> tensor<2xf32>
    %cst_25 = stablehlo.constant dense<3.000000e+00> : tensor<f32>
    %51 = stablehlo.broadcast_in_dim %cst_25, dims = [] : (tensor<f32>) -> tensor<2xf32>
    %52 = stablehlo.divide %50, %51 : tensor<2xf32>
    %53 = stablehlo.broadcast_in_dim %52, dims = [0] : (tensor<2xf32>) -> tensor<2x3xf32>
    %54 = stablehlo.multiply %53, %48 : tensor<2x3xf32>
    %55 = stablehlo.negate %54 : tensor<2x3xf32>
    %56 = stablehlo.broadcast_in_dim %55, dims = [0, 1] : (tensor<2x3xf32>) -> tensor<2x3x1xf32>
    %57 = call @take_along_axis_27(%32#1, %56) : (tensor<2x3x1x1xi32>, tensor<2x3x1xf32>) -> tensor<3x2x3xf32>
    %cst_26 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %58 = stablehlo.pad %57, %cst_26, low = [0, 0, 0], high = [1, 0, 0], interior = [0, 0, 0] : (tensor<3x2x3xf32>, tensor<f32>) -> tensor<4x2x3xf32>
    %cst_27 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %59 = stablehlo.broadcast_in_dim %cst_27, dims = [] : (tensor<f32>) -> tensor<50x16xf32>
    %cst_28 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %60 = stablehlo.broadcast_in_dim %cst_28, dims = [] : (tensor<f32>) -> tensor<16xf32>
    %cst_29 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %61 = stablehlo.broadcast_in_dim %cst_29, dims = [] : (tensor<f32>) -> tensor<16x3xf32>
    %cst_30 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %62 = stablehlo.broadcast_in_dim %cst_30, dims = [] : (tensor<f32>) -> tensor<3xf32>
    %c_31 = stablehlo.constant dense<0> : tensor<i32>
    %63:10 = stablehlo.while(%iterArg = %58, %iterArg_61 = %27#28, %iterArg_62 = %27#29, %iterArg_63 = %27#30, %iterArg_64 = %arg5, %iterArg_65 = %c_31, %iterArg_66 = %59, %iterArg_67 = %60, %iterArg_68 = %61, %iterArg_69 = %62) : tensor<4x2x3xf32>, tensor<4x2x50xf32>, tensor<4x2x16xi1>, tensor<4x2x16xf32>, tensor<16x3xf32>, tensor<i32>, tensor<50x16xf32>, tensor<16xf32>, tensor<16x3xf32>, tensor<3xf32>
    cond {
      %c_70 = stablehlo.constant dense<4> : tensor<i32>
      %160 = stablehlo.compare LT, %iterArg_65, %c_70, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %160 : tensor<i1>
    } do {
      %c_70 = stablehlo.constant dense<4> : tensor<i32>
      %160 = stablehlo.subtract %c_70, %iterArg_65 : tensor<i32>
      %c_71 = stablehlo.constant dense<1> : tensor<i32>
      %161 = stablehlo.subtract %160, %c_71 : tensor<i32>
      %162 = func.call @dynamic_index_in_dim_28(%iterArg, %161) : (tensor<4x2x3xf32>, tensor<i32>) -> tensor<2x3xf32>
      %163 = func.call @dynamic_index_in_dim_29(%iterArg_61, %161) : (tensor<4x2x50xf32>, tensor<i32>) -> tensor<2x50xf32>
      %164 = func.call @dynamic_index_in_dim_30(%iterArg_62, %161) : (tensor<4x2x16xi1>, tensor<i32>) -> tensor<2x16xi1>
      %165 = func.call @dynamic_index_in_dim_31(%iterArg_63, %161) : (tensor<4x2x16xf32>, tensor<i32>) -> tensor<2x16xf32>
      %166:4 = func.call @closed_call_32(%iterArg_64, %iterArg_66, %iterArg_67, %iterArg_68, %iterArg_69, %162, %163, %164, %165) : (tensor<16x3xf32>, tensor<50x16xf32>, tensor<16xf32>, tensor<16x3xf32>, tensor<3xf32>, tensor<2x3xf32>, tensor<2x50xf32>, tensor<2x16xi1>, tensor<2x16xf32>) -> (tensor<50x16xf32>, tensor<16xf32>, tensor<16x3xf32>, tensor<3xf32>)
      %c_72 = stablehlo.constant dense<1> : tensor<i32>
      %167 = stablehlo.add %iterArg_65, %c_72 : tensor<i32>
      stablehlo.return %iterArg, %iterArg_61, %iterArg_62, %iterArg_63, %iterArg_64, %167, %166#0, %166#1, %166#2, %166#3 : tensor<4x2x3xf32>, tensor<4x2x50xf32>, tensor<4x2x16xi1>, tensor<4x2x16xf32>, tensor<16x3xf32>, tensor<i32>, tensor<50x16xf32>, tensor<16xf32>, tensor<16x3xf32>, tensor<3xf32>
    }
    %c_32 = stablehlo.constant dense<1> : tensor<i32>
    %64 = stablehlo.add %arg6, %c_32 : tensor<i32>
    %cst_33 = stablehlo.constant dense<0.899999976> : tensor<f32>
    %65 = stablehlo.broadcast_in_dim %cst_33, dims = [] : (tensor<f32>) -> tensor<16xf32>
    %66 = stablehlo.multiply %65, %arg7 : tensor<16xf32>
    %cst_34 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %67 = stablehlo.broadcast_in_dim %cst_34, dims = [] : (tensor<f32>) -> tensor<16xf32>
    %68 = stablehlo.multiply %67, %63#7 : tensor<16xf32>
    %69 = stablehlo.add %66, %68 : tensor<16xf32>
    %cst_35 = stablehlo.constant dense<0.899999976> : tensor<f32>
    %70 = stablehlo.broadcast_in_dim %cst_35, dims = [] : (tensor<f32>) -> tensor<3xf32>
    %71 = stablehlo.multiply %70, %arg8 : tensor<3xf32>
    %cst_36 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %72 = stablehlo.broadcast_in_dim %cst_36, dims = [] : (tensor<f32>) -> tensor<3xf32>
    %73 = stablehlo.multiply %72, %63#9 : tensor<3xf32>
    %74 = stablehlo.add %71, %73 : tensor<3xf32>
    %cst_37 = stablehlo.constant dense<0.899999976> : tensor<f32>
    %75 = stablehlo.broadcast_in_dim %cst_37, dims = [] : (tensor<f32>) -> tensor<50x16xf32>
    %76 = stablehlo.multiply %75, %arg9 : tensor<50x16xf32>
    %cst_38 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %77 = stablehlo.broadcast_in_dim %cst_38, dims = [] : (tensor<f32>) -> tensor<50x16xf32>
    %78 = stablehlo.multiply %77, %63#6 : tensor<50x16xf32>
    %79 = stablehlo.add %76, %78 : tensor<50x16xf32>
    %cst_39 = stablehlo.constant dense<0.899999976> : tensor<f32>
    %80 = stablehlo.broadcast_in_dim %cst_39, dims = [] : (tensor<f32>) -> tensor<16x3xf32>
    %81 = stablehlo.multiply %80, %arg10 : tensor<16x3xf32>
    %cst_40 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %82 = stablehlo.broadcast_in_dim %cst_40, dims = [] : (tensor<f32>) -> tensor<16x3xf32>
    %83 = stablehlo.multiply %82, %63#8 : tensor<16x3xf32>
    %84 = stablehlo.add %81, %83 : tensor<16x3xf32>
    %cst_41 = stablehlo.constant dense<9.990000e-01> : tensor<f32>
    %85 = stablehlo.broadcast_in_dim %cst_41, dims = [] : (tensor<f32>) -> tensor<16xf32>
    %86 = stablehlo.multiply %85, %arg11 : tensor<16xf32>
    %cst_42 = stablehlo.constant dense<1.000000e-03> : tensor<f32>
    %87 = stablehlo.broadcast_in_dim %cst_42, dims = [] : (tensor<f32>) -> tensor<16xf32>
    %88 = stablehlo.multiply %87, %63#7 : tensor<16xf32>
    %89 = stablehlo.multiply %88, %63#7 : tensor<16xf32>
    %90 = stablehlo.add %86, %89 : tensor<16xf32>
    %cst_43 = stablehlo.constant dense<9.990000e-01> : tensor<f32>
    %91 = stablehlo.broadcast_in_dim %cst_43, dims = [] : (tensor<f32>) -> tensor<3xf32>
    %92 = stablehlo.multiply %91, %arg12 : tensor<3xf32>
    %cst_44 = stablehlo.constant dense<1.000000e-03> : tensor<f32>
    %93 = stablehlo.broadcast_in_dim %cst_44, dims = [] : (tensor<f32>) -> tensor<3xf32>
    %94 = stablehlo.multiply %93, %63#9 : tensor<3xf32>
    %95 = stablehlo.multiply %94, %63#9 : tensor<3xf32>
    %96 = stablehlo.add %92, %95 : tensor<3xf32>
    %cst_45 = stablehlo.constant dense<9.990000e-01> : tensor<f32>
    %97 = stablehlo.broadcast_in_dim %cst_45, dims = [] : (tensor<f32>) -> tensor<50x16xf32>
    %98 = stablehlo.multiply %97, %arg13 : tensor<50x16xf32>
    %cst_46 = stablehlo.constant dense<1.000000e-03> : tensor<f32>
    %99 = stablehlo.broadcast_in_dim %cst_46, dims = [] : (tensor<f32>) -> tensor<50x16xf32>
    %100 = stablehlo.multiply %99, %63#6 : tensor<50x16xf32>
    %101 = stablehlo.multiply %100, %63#6 : tensor<50x16xf32>
    %102 = stablehlo.add %98, %101 : tensor<50x16xf32>
    %cst_47 = stablehlo.constant dense<9.990000e-01> : tensor<f32>
    %103 = stablehlo.broadcast_in_dim %cst_47, dims = [] : (tensor<f32>) -> tensor<16x3xf32>
    %104 = stablehlo.multiply %103, %arg14 : tensor<16x3xf32>
    %cst_48 = stablehlo.constant dense<1.000000e-03> : tensor<f32>
    %105 = stablehlo.broadcast_in_dim %cst_48, dims = [] : (tensor<f32>) -> tensor<16x3xf32>
    %106 = stablehlo.multiply %105, %63#8 : tensor<16x3xf32>
    %107 = stablehlo.multiply %106, %63#8 : tensor<16x3xf32>
    %108 = stablehlo.add %104, %107 : tensor<16x3xf32>
    %109 = stablehlo.convert %64 : (tensor<i32>) -> tensor<f32>
    %cst_49 = stablehlo.constant dense<0.899999976> : tensor<f32>
    %110 = stablehlo.power %cst_49, %109 : tensor<f32>
    %cst_50 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %111 = stablehlo.subtract %cst_50, %110 : tensor<f32>
    %112 = stablehlo.convert %64 : (tensor<i32>) -> tensor<f32>
    %cst_51 = stablehlo.constant dense<9.990000e-01> : tensor<f32>
    %113 = stablehlo.power %cst_51, %112 : tensor<f32>
    %cst_52 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %114 = stablehlo.subtract %cst_52, %113 : tensor<f32>
    %115 = stablehlo.broadcast_in_dim %111, dims = [] : (tensor<f32>) -> tensor<16xf32>
    %116 = stablehlo.divide %69, %115 : tensor<16xf32>
    %cst_53 = stablehlo.constant dense<0.00999999977> : tensor<f32>
    %117 = stablehlo.broadcast_in_dim %cst_53, dims = [] : (tensor<f32>) -> tensor<16xf32>
    %118 = stablehlo.multiply %117, %116 : tensor<16xf32>
    %119 = stablehlo.broadcast_in_dim %114, dims = [] : (tensor<f32>) -> tensor<16xf32>
    %120 = stablehlo.divide %90, %119 : tensor<16xf32>
    %121 = stablehlo.sqrt %120 : tensor<16xf32>
    %cst_54 = stablehlo.constant dense<9.99999993E-9> : tensor<f32>
    %122 = stablehlo.broadcast_in_dim %cst_54, dims = [] : (tensor<f32>) -> tensor<16xf32>
    %123 = stablehlo.add %121, %122 : tensor<16xf32>
    %124 = stablehlo.divide %118, %123 : tensor<16xf32>
    %125 = stablehlo.subtract %arg2, %124 : tensor<16xf32>
    %126 = stablehlo.broadcast_in_dim %111, dims = [] : (tensor<f32>) -> tensor<3xf32>
    %127 = stablehlo.divide %74, %126 : tensor<3xf32>
    %cst_55 = stablehlo.constant dense<0.00999999977> : tensor<f32>
    %128 = stablehlo.broadcast_in_dim %cst_55, dims = [] : (tensor<f32>) -> tensor<3xf32>
    %129 = stablehlo.multiply %128, %127 : tensor<3xf32>
    %130 = stablehlo.broadcast_in_dim %114, dims = [] : (tensor<f32>) -> tensor<3xf32>
    %131 = stablehlo.divide %96, %130 : tensor<3xf32>
    %132 = stablehlo.sqrt %131 : tensor<3xf32>
    %cst_56 = stablehlo.constant dense<9.99999993E-9> : tensor<f32>
    %133 = stablehlo.broadcast_in_dim %cst_56, dims = [] : (tensor<f32>) -> tensor<3xf32>
    %134 = stablehlo.add %132, %133 : tensor<3xf32>
    %135 = stablehlo.divide %129, %134 : tensor<3xf32>
    %136 = stablehlo.subtract %arg3, %135 : tensor<3xf32>
    %137 = stablehlo.broadcast_in_dim %111, dims = [] : (tensor<f32>) -> tensor<50x16xf32>
    %138 = stablehlo.divide %79, %137 : tensor<50x16xf32>
    %cst_57 = stablehlo.constant dense<0.00999999977> : tensor<f32>
    %139 = stablehlo.broadcast_in_dim %cst_57, dims = [] : (tensor<f32>) -> tensor<50x16xf32>
    %140 = stablehlo.multiply %139, %138 : tensor<50x16xf32>
    %141 = stablehlo.broadcast_in_dim %114, dims = [] : (tensor<f32>) -> tensor<50x16xf32>
    %142 = stablehlo.divide %102, %141 : tensor<50x16xf32>
    %143 = stablehlo.sqrt %142 : tensor<50x16xf32>
    %cst_58 = stablehlo.constant dense<9.99999993E-9> : tensor<f32>
    %144 = stablehlo.broadcast_in_dim %cst_58, dims = [] : (tensor<f32>) -> tensor<50x16xf32>
    %145 = stablehlo.add %143, %144 : tensor<50x16xf32>
    %146 = stablehlo.divide %140, %145 : tensor<50x16xf32>
    %147 = stablehlo.subtract %arg4, %146 : tensor<50x16xf32>
    %148 = stablehlo.broadcast_in_dim %111, dims = [] : (tensor<f32>) -> tensor<16x3xf32>
    %149 = stablehlo.divide %84, %148 : tensor<16x3xf32>
    %cst_59 = stablehlo.constant dense<0.00999999977> : tensor<f32>
    %150 = stablehlo.broadcast_in_dim %cst_59, dims = [] : (tensor<f32>) -> tensor<16x3xf32>
    %151 = stablehlo.multiply %150, %149 : tensor<16x3xf32>
    %152 = stablehlo.broadcast_in_dim %114, dims = [] : (tensor<f32>) -> tensor<16x3xf32>
    %153 = stablehlo.divide %108, %152 : tensor<16x3xf32>
    %154 = stablehlo.sqrt %153 : tensor<16x3xf32>
    %cst_60 = stablehlo.constant dense<9.99999993E-9> : tensor<f32>
    %155 = stablehlo.broadcast_in_dim %cst_60, dims = [] : (tensor<f32>) -> tensor<16x3xf32>
    %156 = stablehlo.add %154, %155 : tensor<16x3xf32>
    %157 = stablehlo.divide %151, %156 : tensor<16x3xf32>
    %158 = stablehlo.subtract %arg5, %157 : tensor<16x3xf32>
    %159 = stablehlo.reshape %1 : (tensor<2x1x2xui32>) -> tensor<2x2xui32>
    return %125, %136, %147, %158, %64, %69, %74, %79, %84, %90, %96, %102, %108, %159, %27#23 : tensor<16xf32>, tensor<3xf32>, tensor<50x16xf32>, tensor<16x3xf32>, tensor<i32>, tensor<16xf32>, tensor<3xf32>, tensor<50x16xf32>, tensor<16x3xf32>, tensor<16xf32>, tensor<3xf32>, tensor<50x16xf32>, tensor<16x3xf32>, tensor<2x2xui32>, tensor<2x4xi32>
  }
  func.func private @_threefry_split(%arg0: tensor<2x2xui32>) -> tensor<2x2x2xui32> {
    %0 = stablehlo.slice %arg0 [0:2, 0:1] : (tensor<2x2xui32>) -> tensor<2x1xui32>
    %1 = stablehlo.reshape %0 : (tensor<2x1xui32>) -> tensor<2xui32>
    %2 = stablehlo.slice %arg0 [0:2, 1:2] : (tensor<2x2xui32>) -> tensor<2x1xui32>
    %3 = stablehlo.reshape %2 : (tensor<2x1xui32>) -> tensor<2xui32>
    %4 = stablehlo.iota dim = 0 : tensor<2xui64>
    %c = stablehlo.constant dense<1> : tensor<ui64>
    %5 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<ui64>) -> tensor<2xui64>
    %6 = stablehlo.multiply %5, %4 : tensor<2xui64>
    %c_0 = stablehlo.constant dense<32> : tensor<ui64>
    %7 = stablehlo.broadcast_in_dim %c_0, dims = [] : (tensor<ui64>) -> tensor<2xui64>
    %8 = stablehlo.shift_right_logical %6, %7 : tensor<2xui64>
    %9 = stablehlo.convert %6 : (tensor<2xui64>) -> tensor<2xui32>
    %10 = stablehlo.convert %8 : (tensor<2xui64>) -> tensor<2xui32>
    %11 = stablehlo.broadcast_in_dim %10, dims = [1] : (tensor<2xui32>) -> tensor<1x2xui32>
    %12 = stablehlo.broadcast_in_dim %9, dims = [1] : (tensor<2xui32>) -> tensor<1x2xui32>
    %13 = stablehlo.broadcast_in_dim %1, dims = [0] : (tensor<2xui32>) -> tensor<2x1xui32>
    %14 = stablehlo.broadcast_in_dim %3, dims = [0] : (tensor<2xui32>) -> tensor<2x1xui32>
    %15:2 = call @threefry2x32(%13, %14, %11, %12) : (tensor<2x1xui32>, tensor<2x1xui32>, tensor<1x2xui32>, tensor<1x2xui32>) -> (tensor<2x2xui32>, tensor<2x2xui32>)
    %16 = stablehlo.broadcast_in_dim %15#0, dims = [0, 1] : (tensor<2x2xui32>) -> tensor<2x2x1xui32>
    %17 = stablehlo.broadcast_in_dim %15#1, dims = [0, 1] : (tensor<2x2xui32>) -> tensor<2x2x1xui32>
    %18 = stablehlo.concatenate %16, %17, dim = 2 : (tensor<2x2x1xui32>, tensor<2x2x1xui32>) -> tensor<2x2x2xui32>
    return %18 : tensor<2x2x2xui32>
  }
  func.func private @threefry2x32(%arg0: tensor<2x1xui32>, %arg1: tensor<2x1xui32>, %arg2: tensor<1x2xui32>, %arg3: tensor<1x2xui32>) -> (tensor<2x2xui32>, tensor<2x2xui32>) {
    %c = stablehlo.constant dense<[13, 15, 26, 6]> : tensor<4xui32>
    %c_0 = stablehlo.constant dense<[17, 29, 16, 24]> : tensor<4xui32>
    %0 = stablehlo.xor %arg0, %arg1 : tensor<2x1xui32>
    %c_1 = stablehlo.constant dense<466688986> : tensor<ui32>
    %1 = stablehlo.broadcast_in_dim %c_1, dims = [] : (tensor<ui32>) -> tensor<2x1xui32>
    %2 = stablehlo.xor %0, %1 : tensor<2x1xui32>
    %3 = stablehlo.broadcast_in_dim %arg2, dims = [0, 1] : (tensor<1x2xui32>) -> tensor<2x2xui32>
    %4 = stablehlo.broadcast_in_dim %arg0, dims = [0, 1] : (tensor<2x1xui32>) -> tensor<2x2xui32>
    %5 = stablehlo.add %3, %4 : tensor<2x2xui32>
    %6 = stablehlo.broadcast_in_dim %arg3, dims = [0, 1] : (tensor<1x2xui32>) -> tensor<2x2xui32>
    %7 = stablehlo.broadcast_in_dim %arg1, dims = [0, 1] : (tensor<2x1xui32>) -> tensor<2x2xui32>
    %8 = stablehlo.add %6, %7 : tensor<2x2xui32>
    %c_2 = stablehlo.constant dense<0> : tensor<i32>
    %c_3 = stablehlo.constant dense<0> : tensor<i32>
    %9:9 = stablehlo.while(%iterArg = %c_3, %iterArg_4 = %c_2, %iterArg_5 = %5, %iterArg_6 = %8, %iterArg_7 = %arg1, %iterArg_8 = %2, %iterArg_9 = %arg0, %iterArg_10 = %c, %iterArg_11 = %c_0) : tensor<i32>, tensor<i32>, tensor<2x2xui32>, tensor<2x2xui32>, tensor<2x1xui32>, tensor<2x1xui32>, tensor<2x1xui32>, tensor<4xui32>, tensor<4xui32>
    cond {
      %c_12 = stablehlo.constant dense<5> : tensor<i32>
      %10 = stablehlo.compare LT, %iterArg, %c_12, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %10 : tensor<i1>
    } do {
      %10:8 = func.call @closed_call_0(%iterArg_4, %iterArg_5, %iterArg_6, %iterArg_7, %iterArg_8, %iterArg_9, %iterArg_10, %iterArg_11) : (tensor<i32>, tensor<2x2xui32>, tensor<2x2xui32>, tensor<2x1xui32>, tensor<2x1xui32>, tensor<2x1xui32>, tensor<4xui32>, tensor<4xui32>) -> (tensor<i32>, tensor<2x2xui32>, tensor<2x2xui32>, tensor<2x1xui32>, tensor<2x1xui32>, tensor<2x1xui32>, tensor<4xui32>, tensor<4xui32>)
      %c_12 = stablehlo.constant dense<1> : tensor<i32>
      %11 = stablehlo.add %iterArg, %c_12 : tensor<i32>
      stablehlo.return %11, %10#0, %10#1, %10#2, %10#3, %10#4, %10#5, %10#6, %10#7 : tensor<i32>, tensor<i32>, tensor<2x2xui32>, tensor<2x2xui32>, tensor<2x1xui32>, tensor<2x1xui32>, tensor<2x1xui32>, tensor<4xui32>, tensor<4xui32>
    }
    return %9#2, %9#3 : tensor<2x2xui32>, tensor<2x2xui32>
  }
  func.func private @closed_call_0(%arg0: tensor<i32>, %arg1: tensor<2x2xui32>, %arg2: tensor<2x2xui32>, %arg3: tensor<2x1xui32>, %arg4: tensor<2x1xui32>, %arg5: tensor<2x1xui32>, %arg6: tensor<4xui32>, %arg7: tensor<4xui32>) -> (tensor<i32>, tensor<2x2xui32>, tensor<2x2xui32>, tensor<2x1xui32>, tensor<2x1xui32>, tensor<2x1xui32>, tensor<4xui32>, tensor<4xui32>) {
    %c = stablehlo.constant dense<1> : tensor<i32>
    %0 = stablehlo.add %arg0, %c : tensor<i32>
    %1 = stablehlo.slice %arg6 [0:1] : (tensor<4xui32>) -> tensor<1xui32>
    %2 = stablehlo.reshape %1 : (tensor<1xui32>) -> tensor<ui32>
    %3 = stablehlo.add %arg1, %arg2 : tensor<2x2xui32>
    %4 = stablehlo.broadcast_in_dim %2, dims = [] : (tensor<ui32>) -> tensor<2x2xui32>
    %5 = stablehlo.shift_left %arg2, %4 : tensor<2x2xui32>
    %c_0 = stablehlo.constant dense<32> : tensor<ui32>
    %6 = stablehlo.subtract %c_0, %2 : tensor<ui32>
    %7 = stablehlo.broadcast_in_dim %6, dims = [] : (tensor<ui32>) -> tensor<2x2xui32>
    %8 = stablehlo.shift_right_logical %arg2, %7 : tensor<2x2xui32>
    %9 = stablehlo.or %5, %8 : tensor<2x2xui32>
    %10 = stablehlo.xor %3, %9 : tensor<2x2xui32>
    %11 = stablehlo.slice %arg6 [1:2] : (tensor<4xui32>) -> tensor<1xui32>
    %12 = stablehlo.reshape %11 : (tensor<1xui32>) -> tensor<ui32>
    %13 = stablehlo.add %3, %10 : tensor<2x2xui32>
    %14 = stablehlo.broadcast_in_dim %12, dims = [] : (tensor<ui32>) -> tensor<2x2xui32>
    %15 = stablehlo.shift_left %10, %14 : tensor<2x2xui32>
    %c_1 = stablehlo.constant dense<32> : tensor<ui32>
    %16 = stablehlo.subtract %c_1, %12 : tensor<ui32>
    %17 = stablehlo.broadcast_in_dim %16, dims = [] : (tensor<ui32>) -> tensor<2x2xui32>
    %18 = stablehlo.shift_right_logical %10, %17 : tensor<2x2xui32>
    %19 = stablehlo.or %15, %18 : tensor<2x2xui32>
    %20 = stablehlo.xor %13, %19 : tensor<2x2xui32>
    %21 = stablehlo.slice %arg6 [2:3] : (tensor<4xui32>) -> tensor<1xui32>
    %22 = stablehlo.reshape %21 : (tensor<1xui32>) -> tensor<ui32>
    %23 = stablehlo.add %13, %20 : tensor<2x2xui32>
    %24 = stablehlo.broadcast_in_dim %22, dims = [] : (tensor<ui32>) -> tensor<2x2xui32>
    %25 = stablehlo.shift_left %20, %24 : tensor<2x2xui32>
    %c_2 = stablehlo.constant dense<32> : tensor<ui32>
    %26 = stablehlo.subtract %c_2, %22 : tensor<ui32>
    %27 = stablehlo.broadcast_in_dim %26, dims = [] : (tensor<ui32>) -> tensor<2x2xui32>
    %28 = stablehlo.shift_right_logical %20, %27 : tensor<2x2xui32>
    %29 = stablehlo.or %25, %28 : tensor<2x2xui32>
    %30 = stablehlo.xor %23, %29 : tensor<2x2xui32>
    %31 = stablehlo.slice %arg6 [3:4] : (tensor<4xui32>) -> tensor<1xui32>
    %32 = stablehlo.reshape %31 : (tensor<1xui32>) -> tensor<ui32>
    %33 = stablehlo.add %23, %30 : tensor<2x2xui32>
    %34 = stablehlo.broadcast_in_dim %32, dims = [] : (tensor<ui32>) -> tensor<2x2xui32>
    %35 = stablehlo.shift_left %30, %34 : tensor<2x2xui32>
    %c_3 = stablehlo.constant dense<32> : tensor<ui32>
    %36 = stablehlo.subtract %c_3, %32 : tensor<ui32>
    %37 = stablehlo.broadcast_in_dim %36, dims = [] : (tensor<ui32>) -> tensor<2x2xui32>
    %38 = stablehlo.shift_right_logical %30, %37 : tensor<2x2xui32>
    %39 = stablehlo.or %35, %38 : tensor<2x2xui32>
    %40 = stablehlo.xor %33, %39 : tensor<2x2xui32>
    %41 = stablehlo.broadcast_in_dim %arg3, dims = [0, 1] : (tensor<2x1xui32>) -> tensor<2x2xui32>
    %42 = stablehlo.add %33, %41 : tensor<2x2xui32>
    %43 = stablehlo.broadcast_in_dim %arg4, dims = [0, 1] : (tensor<2x1xui32>) -> tensor<2x2xui32>
    %44 = stablehlo.add %40, %43 : tensor<2x2xui32>
    %c_4 = stablehlo.constant dense<1> : tensor<i32>
    %45 = stablehlo.add %arg0, %c_4 : tensor<i32>
    %46 = stablehlo.convert %45 : (tensor<i32>) -> tensor<ui32>
    %47 = stablehlo.broadcast_in_dim %46, dims = [] : (tensor<ui32>) -> tensor<2x2xui32>
    %48 = stablehlo.add %44, %47 : tensor<2x2xui32>
    return %0, %42, %48, %arg4, %arg5, %arg3, %arg7, %arg6 : tensor<i32>, tensor<2x2xui32>, tensor<2x2xui32>, tensor<2x1xui32>, tensor<2x1xui32>, tensor<2x1xui32>, tensor<4xui32>, tensor<4xui32>
  }
  func.func private @_threefry_split_1(%arg0: tensor<2x2xui32>) -> tensor<2x4x2xui32> {
    %0 = stablehlo.slice %arg0 [0:2, 0:1] : (tensor<2x2xui32>) -> tensor<2x1xui32>
    %1 = stablehlo.reshape %0 : (tensor<2x1xui32>) -> tensor<2xui32>
    %2 = stablehlo.slice %arg0 [0:2, 1:2] : (tensor<2x2xui32>) -> tensor<2x1xui32>
    %3 = stablehlo.reshape %2 : (tensor<2x1xui32>) -> tensor<2xui32>
    %4 = stablehlo.iota dim = 0 : tensor<4xui64>
    %c = stablehlo.constant dense<1> : tensor<ui64>
    %5 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<ui64>) -> tensor<4xui64>
    %6 = stablehlo.multiply %5, %4 : tensor<4xui64>
    %c_0 = stablehlo.constant dense<32> : tensor<ui64>
    %7 = stablehlo.broadcast_in_dim %c_0, dims = [] : (tensor<ui64>) -> tensor<4xui64>
    %8 = stablehlo.shift_right_logical %6, %7 : tensor<4xui64>
    %9 = stablehlo.convert %6 : (tensor<4xui64>) -> tensor<4xui32>
    %10 = stablehlo.convert %8 : (tensor<4xui64>) -> tensor<4xui32>
    %11 = stablehlo.broadcast_in_dim %10, dims = [1] : (tensor<4xui32>) -> tensor<1x4xui32>
    %12 = stablehlo.broadcast_in_dim %9, dims = [1] : (tensor<4xui32>) -> tensor<1x4xui32>
    %13 = stablehlo.broadcast_in_dim %1, dims = [0] : (tensor<2xui32>) -> tensor<2x1xui32>
    %14 = stablehlo.broadcast_in_dim %3, dims = [0] : (tensor<2xui32>) -> tensor<2x1xui32>
    %15:2 = call @threefry2x32_2(%13, %14, %11, %12) : (tensor<2x1xui32>, tensor<2x1xui32>, tensor<1x4xui32>, tensor<1x4xui32>) -> (tensor<2x4xui32>, tensor<2x4xui32>)
    %16 = stablehlo.broadcast_in_dim %15#0, dims = [0, 1] : (tensor<2x4xui32>) -> tensor<2x4x1xui32>
    %17 = stablehlo.broadcast_in_dim %15#1, dims = [0, 1] : (tensor<2x4xui32>) -> tensor<2x4x1xui32>
    %18 = stablehlo.concatenate %16, %17, dim = 2 : (tensor<2x4x1xui32>, tensor<2x4x1xui32>) -> tensor<2x4x2xui32>
    return %18 : tensor<2x4x2xui32>
  }
  func.func private @threefry2x32_2(%arg0: tensor<2x1xui32>, %arg1: tensor<2x1xui32>, %arg2: tensor<1x4xui32>, %arg3: tensor<1x4xui32>) -> (tensor<2x4xui32>, tensor<2x4xui32>) {
    %c = stablehlo.constant dense<[13, 15, 26, 6]> : tensor<4xui32>
    %c_0 = stablehlo.constant dense<[17, 29, 16, 24]> : tensor<4xui32>
    %0 = stablehlo.xor %arg0, %arg1 : tensor<2x1xui32>
    %c_1 = stablehlo.constant dense<466688986> : tensor<ui32>
    %1 = stablehlo.broadcast_in_dim %c_1, dims = [] : (tensor<ui32>) -> tensor<2x1xui32>
    %2 = stablehlo.xor %0, %1 : tensor<2x1xui32>
    %3 = stablehlo.broadcast_in_dim %arg2, dims = [0, 1] : (tensor<1x4xui32>) -> tensor<2x4xui32>
    %4 = stablehlo.broadcast_in_dim %arg0, dims = [0, 1] : (tensor<2x1xui32>) -> tensor<2x4xui32>
    %5 = stablehlo.add %3, %4 : tensor<2x4xui32>
    %6 = stablehlo.broadcast_in_dim %arg3, dims = [0, 1] : (tensor<1x4xui32>) -> tensor<2x4xui32>
    %7 = stablehlo.broadcast_in_dim %arg1, dims = [0, 1] : (tensor<2x1xui32>) -> tensor<2x4xui32>
    %8 = stablehlo.add %6, %7 : tensor<2x4xui32>
    %c_2 = stablehlo.constant dense<0> : tensor<i32>
    %c_3 = stablehlo.constant dense<0> : tensor<i32>
    %9:9 = stablehlo.while(%iterArg = %c_3, %iterArg_4 = %c_2, %iterArg_5 = %5, %iterArg_6 = %8, %iterArg_7 = %arg1, %iterArg_8 = %2, %iterArg_9 = %arg0, %iterArg_10 = %c, %iterArg_11 = %c_0) : tensor<i32>, tensor<i32>, tensor<2x4xui32>, tensor<2x4xui32>, tensor<2x1xui32>, tensor<2x1xui32>, tensor<2x1xui32>, tensor<4xui32>, tensor<4xui32>
    cond {
      %c_12 = stablehlo.constant dense<5> : tensor<i32>
      %10 = stablehlo.compare LT, %iterArg, %c_12, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %10 : tensor<i1>
    } do {
      %10:8 = func.call @closed_call_3(%iterArg_4, %iterArg_5, %iterArg_6, %iterArg_7, %iterArg_8, %iterArg_9, %iterArg_10, %iterArg_11) : (tensor<i32>, tensor<2x4xui32>, tensor<2x4xui32>, tensor<2x1xui32>, tensor<2x1xui32>, tensor<2x1xui32>, tensor<4xui32>, tensor<4xui32>) -> (tensor<i32>, tensor<2x4xui32>, tensor<2x4xui32>, tensor<2x1xui32>, tensor<2x1xui32>, tensor<2x1xui32>, tensor<4xui32>, tensor<4xui32>)
      %c_12 = stablehlo.constant dense<1> : tensor<i32>
      %11 = stablehlo.add %iterArg, %c_12 : tensor<i32>
      stablehlo.return %11, %10#0, %10#1, %10#2, %10#3, %10#4, %10#5, %10#6, %10#7 : tensor<i32>, tensor<i32>, tensor<2x4xui32>, tensor<2x4xui32>, tensor<2x1xui32>, tensor<2x1xui32>, tensor<2x1xui32>, tensor<4xui32>, tensor<4xui32>
    }
    return %9#2, %9#3 : tensor<2x4xui32>, tensor<2x4xui32>
  }
  func.func private @closed_call_3(%arg0: tensor<i32>, %arg1: tensor<2x4xui32>, %arg2: tensor<2x4xui32>, %arg3: tensor<2x1xui32>, %arg4: tensor<2x1xui32>, %arg5: tensor<2x1xui32>, %arg6: tensor<4xui32>, %arg7: tensor<4xui32>) -> (tensor<i32>, tensor<2x4xui32>, tensor<2x4xui32>, tensor<2x1xui32>, tensor<2x1xui32>, tensor<2x1xui32>, tensor<4xui32>, tensor<4xui32>) {
    %c = stablehlo.constant dense<1> : tensor<i32>
    %0 = stablehlo.add %arg0, %c : tensor<i32>
    %1 = stablehlo.slice %arg6 [0:1] : (tensor<4xui32>) -> tensor<1xui32>
    %2 = stablehlo.reshape %1 : (tensor<1xui32>) -> tensor<ui32>
    %3 = stablehlo.add %arg1, %arg2 : tensor<2x4xui32>
    %4 = stablehlo.broadcast_in_dim %2, dims = [] : (tensor<ui32>) -> tensor<2x4xui32>
    %5 = stablehlo.shift_left %arg2, %4 : tensor<2x4xui32>
    %c_0 = stablehlo.constant dense<32> : tensor<ui32>
    %6 = stablehlo.subtract %c_0, %2 : tensor<ui32>
    %7 = stablehlo.broadcast_in_dim %6, dims = [] : (tensor<ui32>) -> tensor<2x4xui32>
    %8 = stablehlo.shift_right_logical %arg2, %7 : tensor<2x4xui32>
    %9 = stablehlo.or %5, %8 : tensor<2x4xui32>
    %10 = stablehlo.xor %3, %9 : tensor<2x4xui32>
    %11 = stablehlo.slice %arg6 [1:2] : (tensor<4xui32>) -> tensor<1xui32>
    %12 = stablehlo.reshape %11 : (tensor<1xui32>) -> tensor<ui32>
    %13 = stablehlo.add %3, %10 : tensor<2x4xui32>
    %14 = stablehlo.broadcast_in_dim %12, dims = [] : (tensor<ui32>) -> tensor<2x4xui32>
    %15 = stablehlo.shift_left %10, %14 : tensor<2x4xui32>
    %c_1 = stablehlo.constant dense<32> : tensor<ui32>
    %16 = stablehlo.subtract %c_1, %12 : tensor<ui32>
    %17 = stablehlo.broadcast_in_dim %16, dims = [] : (tensor<ui32>) -> tensor<2x4xui32>
    %18 = stablehlo.shift_right_logical %10, %17 : tensor<2x4xui32>
    %19 = stablehlo.or %15, %18 : tensor<2x4xui32>
    %20 = stablehlo.xor %13, %19 : tensor<2x4xui32>
    %21 = stablehlo.slice %arg6 [2:3] : (tensor<4xui32>) -> tensor<1xui32>
    %22 = stablehlo.reshape %21 : (tensor<1xui32>) -> tensor<ui32>
    %23 = stablehlo.add %13, %20 : tensor<2x4xui32>
    %24 = stablehlo.broadcast_in_dim %22, dims = [] : (tensor<ui32>) -> tensor<2x4xui32>
    %25 = stablehlo.shift_left %20, %24 : tensor<2x4xui32>
    %c_2 = stablehlo.constant dense<32> : tensor<ui32>
    %26 = stablehlo.subtract %c_2, %22 : tensor<ui32>
    %27 = stablehlo.broadcast_in_dim %26, dims = [] : (tensor<ui32>) -> tensor<2x4xui32>
    %28 = stablehlo.shift_right_logical %20, %27 : tensor<2x4xui32>
    %29 = stablehlo.or %25, %28 : tensor<2x4xui32>
    %30 = stablehlo.xor %23, %29 : tensor<2x4xui32>
    %31 = stablehlo.slice %arg6 [3:4] : (tensor<4xui32>) -> tensor<1xui32>
    %32 = stablehlo.reshape %31 : (tensor<1xui32>) -> tensor<ui32>
    %33 = stablehlo.add %23, %30 : tensor<2x4xui32>
    %34 = stablehlo.broadcast_in_dim %32, dims = [] : (tensor<ui32>) -> tensor<2x4xui32>
    %35 = stablehlo.shift_left %30, %34 : tensor<2x4xui32>
    %c_3 = stablehlo.constant dense<32> : tensor<ui32>
    %36 = stablehlo.subtract %c_3, %32 : tensor<ui32>
    %37 = stablehlo.broadcast_in_dim %36, dims = [] : (tensor<ui32>) -> tensor<2x4xui32>
    %38 = stablehlo.shift_right_logical %30, %37 : tensor<2x4xui32>
    %39 = stablehlo.or %35, %38 : tensor<2x4xui32>
    %40 = stablehlo.xor %33, %39 : tensor<2x4xui32>
    %41 = stablehlo.broadcast_in_dim %arg3, dims = [0, 1] : (tensor<2x1xui32>) -> tensor<2x4xui32>
    %42 = stablehlo.add %33, %41 : tensor<2x4xui32>
    %43 = stablehlo.broadcast_in_dim %arg4, dims = [0, 1] : (tensor<2x1xui32>) -> tensor<2x4xui32>
    %44 = stablehlo.add %40, %43 : tensor<2x4xui32>
    %c_4 = stablehlo.constant dense<1> : tensor<i32>
    %45 = stablehlo.add %arg0, %c_4 : tensor<i32>
    %46 = stablehlo.convert %45 : (tensor<i32>) -> tensor<ui32>
    %47 = stablehlo.broadcast_in_dim %46, dims = [] : (tensor<ui32>) -> tensor<2x4xui32>
    %48 = stablehlo.add %44, %47 : tensor<2x4xui32>
    return %0, %42, %48, %arg4, %arg5, %arg3, %arg7, %arg6 : tensor<i32>, tensor<2x4xui32>, tensor<2x4xui32>, tensor<2x1xui32>, tensor<2x1xui32>, tensor<2x1xui32>, tensor<4xui32>, tensor<4xui32>
  }
  func.func private @clip(%arg0: tensor<i32>, %arg1: tensor<i32>) -> (tensor<i32>, tensor<i32>) {
    %0 = stablehlo.convert %arg0 : tensor<i32>
    %1 = stablehlo.convert %arg1 : tensor<i32>
    return %1, %0 : tensor<i32>, tensor<i32>
  }
  func.func private @_where(%arg0: tensor<f32>, %arg1: tensor<f32>) -> (tensor<2xf32>, tensor<2xf32>) {
    %0 = stablehlo.broadcast_in_dim %arg1, dims = [] : (tensor<f32>) -> tensor<2xf32>
    %1 = stablehlo.broadcast_in_dim %arg0, dims = [] : (tensor<f32>) -> tensor<2xf32>
    return %0, %1 : tensor<2xf32>, tensor<2xf32>
  }
  func.func private @_where_4(%arg0: tensor<f32>) -> tensor<2xf32> {
    %0 = stablehlo.broadcast_in_dim %arg0, dims = [] : (tensor<f32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
  func.func private @_randint(%arg0: tensor<i32>, %arg1: tensor<i32>) -> (tensor<i32>, tensor<ui32>, tensor<ui32>) {
    %c = stablehlo.constant dense<2147483647> : tensor<i32>
    %c_0 = stablehlo.constant dense<-2147483648> : tensor<i32>
    %c_1 = stablehlo.constant dense<2147483647> : tensor<i32>
    %0 = call @clip_5(%c, %c_0, %c_1) : (tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<i32>
    %1 = stablehlo.compare GT, %arg1, %0, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %c_2 = stablehlo.constant dense<-2147483648> : tensor<i32>
    %c_3 = stablehlo.constant dense<2147483647> : tensor<i32>
    %2 = call @clip_6(%arg0, %c_2, %c_3) : (tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<i32>
    %3 = stablehlo.convert %2 : tensor<i32>
    %c_4 = stablehlo.constant dense<-2147483648> : tensor<i32>
    %c_5 = stablehlo.constant dense<2147483647> : tensor<i32>
    %4 = call @clip_6(%arg1, %c_4, %c_5) : (tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<i32>
    %5 = stablehlo.convert %4 : tensor<i32>
    %6 = stablehlo.subtract %5, %3 : tensor<i32>
    %7 = stablehlo.convert %6 : (tensor<i32>) -> tensor<ui32>
    %8 = stablehlo.compare LE, %5, %3, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %c_6 = stablehlo.constant dense<1> : tensor<ui32>
    %9 = stablehlo.select %8, %c_6, %7 : tensor<i1>, tensor<ui32>
    %10 = stablehlo.compare GT, %5, %3, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %11 = stablehlo.and %1, %10 : tensor<i1>
    %c_7 = stablehlo.constant dense<1> : tensor<ui32>
    %12 = stablehlo.add %9, %c_7 : tensor<ui32>
    %13 = stablehlo.select %11, %12, %9 : tensor<i1>, tensor<ui32>
    %c_8 = stablehlo.constant dense<65536> : tensor<ui32>
    %14 = stablehlo.remainder %c_8, %13 : tensor<ui32>
    %15 = stablehlo.multiply %14, %14 : tensor<ui32>
    %16 = stablehlo.remainder %15, %13 : tensor<ui32>
    return %3, %13, %16 : tensor<i32>, tensor<ui32>, tensor<ui32>
  }
  func.func private @clip_5(%arg0: tensor<i32>, %arg1: tensor<i32>, %arg2: tensor<i32>) -> tensor<i32> {
    %0 = stablehlo.maximum %arg1, %arg0 : tensor<i32>
    %1 = stablehlo.minimum %arg2, %0 : tensor<i32>
    return %1 : tensor<i32>
  }
  func.func private @clip_6(%arg0: tensor<i32>, %arg1: tensor<i32>, %arg2: tensor<i32>) -> tensor<i32> {
    %0 = stablehlo.maximum %arg1, %arg0 : tensor<i32>
    %1 = stablehlo.minimum %arg2, %0 : tensor<i32>
    return %1 : tensor<i32>
  }
  func.func private @dynamic_index_in_dim(%arg0: tensor<4x2x2xui32>, %arg1: tensor<i32>) -> tensor<2x2xui32> {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.dynamic_slice %arg0, %arg1, %c, %c_0, sizes = [1, 2, 2] : (tensor<4x2x2xui32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x2x2xui32>
    %1 = stablehlo.reshape %0 : (tensor<1x2x2xui32>) -> tensor<2x2xui32>
    return %1 : tensor<2x2xui32>
  }
  func.func private @closed_call_7(%arg0: tensor<2xi32>, %arg1: tensor<i32>, %arg2: tensor<ui32>, %arg3: tensor<ui32>, %arg4: tensor<2xi32>, %arg5: tensor<2xi32>, %arg6: tensor<1x10x5xi32>, %arg7: tensor<1x10x5xi32>, %arg8: tensor<1x10x5xi32>, %arg9: tensor<1x10x5xi32>, %arg10: tensor<50x16xf32>, %arg11: tensor<1x16xf32>, %arg12: tensor<16x3xf32>, %arg13: tensor<1x3xf32>, %arg14: tensor<i32>, %arg15: tensor<i32>, %arg16: tensor<2xf32>, %arg17: tensor<2xf32>, %arg18: tensor<2xf32>, %arg19: tensor<2xf32>, %arg20: tensor<2xf32>, %arg21: tensor<2x4xi32>, %arg22: tensor<2x2xui32>) -> (tensor<2x4xi32>, tensor<2x3xf32>, tensor<2xi32>, tensor<2xf32>, tensor<2xf32>, tensor<2x50xf32>, tensor<2x16xi1>, tensor<2x16xf32>) {
    %0 = call @_threefry_split_8(%arg22) : (tensor<2x2xui32>) -> tensor<2x3x2xui32>
    %1 = stablehlo.slice %0 [0:2, 0:1, 0:2] : (tensor<2x3x2xui32>) -> tensor<2x1x2xui32>
    %2 = stablehlo.reshape %1 : (tensor<2x1x2xui32>) -> tensor<2x2xui32>
    %3 = stablehlo.slice %arg21 [0:2, 0:1] : (tensor<2x4xi32>) -> tensor<2x1xi32>
    %4 = stablehlo.reshape %3 : (tensor<2x1xi32>) -> tensor<2xi32>
    %5 = stablehlo.broadcast_in_dim %4, dims = [0] : (tensor<2xi32>) -> tensor<2x1x1xi32>
    %6 = stablehlo.broadcast_in_dim %arg6, dims = [0, 1, 2] : (tensor<1x10x5xi32>) -> tensor<2x10x5xi32>
    %7 = stablehlo.broadcast_in_dim %5, dims = [0, 1, 2] : (tensor<2x1x1xi32>) -> tensor<2x10x5xi32>
    %8 = stablehlo.compare EQ, %6, %7, SIGNED : (tensor<2x10x5xi32>, tensor<2x10x5xi32>) -> tensor<2x10x5xi1>
    %9 = stablehlo.slice %arg21 [0:2, 1:2] : (tensor<2x4xi32>) -> tensor<2x1xi32>
    %10 = stablehlo.reshape %9 : (tensor<2x1xi32>) -> tensor<2xi32>
    %11 = stablehlo.broadcast_in_dim %10, dims = [0] : (tensor<2xi32>) -> tensor<2x1x1xi32>
    %12 = stablehlo.broadcast_in_dim %arg7, dims = [0, 1, 2] : (tensor<1x10x5xi32>) -> tensor<2x10x5xi32>
    %13 = stablehlo.broadcast_in_dim %11, dims = [0, 1, 2] : (tensor<2x1x1xi32>) -> tensor<2x10x5xi32>
    %14 = stablehlo.compare EQ, %12, %13, SIGNED : (tensor<2x10x5xi32>, tensor<2x10x5xi32>) -> tensor<2x10x5xi1>
    %15 = stablehlo.and %8, %14 : tensor<2x10x5xi1>
    %16 = stablehlo.slice %arg21 [0:2, 2:3] : (tensor<2x4xi32>) -> tensor<2x1xi32>
    %17 = stablehlo.reshape %16 : (tensor<2x1xi32>) -> tensor<2xi32>
    %18 = stablehlo.broadcast_in_dim %17, dims = [0] : (tensor<2xi32>) -> tensor<2x1x1xi32>
    %19 = stablehlo.broadcast_in_dim %arg8, dims = [0, 1, 2] : (tensor<1x10x5xi32>) -> tensor<2x10x5xi32>
    %20 = stablehlo.broadcast_in_dim %18, dims = [0, 1, 2] : (tensor<2x1x1xi32>) -> tensor<2x10x5xi32>
    %21 = stablehlo.compare EQ, %19, %20, SIGNED : (tensor<2x10x5xi32>, tensor<2x10x5xi32>) -> tensor<2x10x5xi1>
    %22 = stablehlo.slice %arg21 [0:2, 3:4] : (tensor<2x4xi32>) -> tensor<2x1xi32>
    %23 = stablehlo.reshape %22 : (tensor<2x1xi32>) -> tensor<2xi32>
    %24 = stablehlo.broadcast_in_dim %23, dims = [0] : (tensor<2xi32>) -> tensor<2x1x1xi32>
    %25 = stablehlo.broadcast_in_dim %arg9, dims = [0, 1, 2] : (tensor<1x10x5xi32>) -> tensor<2x10x5xi32>
    %26 = stablehlo.broadcast_in_dim %24, dims = [0, 1, 2] : (tensor<2x1x1xi32>) -> tensor<2x10x5xi32>
    %27 = stablehlo.compare EQ, %25, %26, SIGNED : (tensor<2x10x5xi32>, tensor<2x10x5xi32>) -> tensor<2x10x5xi1>
    %28 = stablehlo.and %21, %27 : tensor<2x10x5xi1>
    %29 = stablehlo.or %15, %28 : tensor<2x10x5xi1>
    %30 = stablehlo.convert %29 : (tensor<2x10x5xi1>) -> tensor<2x10x5xf32>
    %31 = stablehlo.reshape %30 : (tensor<2x10x5xf32>) -> tensor<2x50xf32>
    %32 = stablehlo.dot_general %31, %arg10, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x50xf32>, tensor<50x16xf32>) -> tensor<2x16xf32>
    %33 = stablehlo.broadcast_in_dim %arg11, dims = [0, 1] : (tensor<1x16xf32>) -> tensor<2x16xf32>
    %34 = stablehlo.add %32, %33 : tensor<2x16xf32>
    %35 = call @relu(%34) : (tensor<2x16xf32>) -> tensor<2x16xf32>
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %36 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<2x16xf32>
    %37 = stablehlo.compare GT, %34, %36, FLOAT : (tensor<2x16xf32>, tensor<2x16xf32>) -> tensor<2x16xi1>
    %38 = stablehlo.dot_general %35, %arg12, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x16xf32>, tensor<16x3xf32>) -> tensor<2x3xf32>
    %39 = stablehlo.broadcast_in_dim %arg13, dims = [0, 1] : (tensor<1x3xf32>) -> tensor<2x3xf32>
    %40 = stablehlo.add %38, %39 : tensor<2x3xf32>
    %41 = call @argmax(%40) : (tensor<2x3xf32>) -> tensor<2xi32>
    %42 = stablehlo.slice %arg21 [0:2, 3:4] : (tensor<2x4xi32>) -> tensor<2x1xi32>
    %43 = stablehlo.reshape %42 : (tensor<2x1xi32>) -> tensor<2xi32>
    %44 = stablehlo.add %43, %41 : tensor<2xi32>
    %c = stablehlo.constant dense<1> : tensor<i32>
    %45 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i32>) -> tensor<2xi32>
    %46 = stablehlo.subtract %44, %45 : tensor<2xi32>
    %47 = call @clip_11(%46, %arg14, %arg15) : (tensor<2xi32>, tensor<i32>, tensor<i32>) -> tensor<2xi32>
    %48 = stablehlo.slice %arg21 [0:2, 0:1] : (tensor<2x4xi32>) -> tensor<2x1xi32>
    %49 = stablehlo.reshape %48 : (tensor<2x1xi32>) -> tensor<2xi32>
    %c_0 = stablehlo.constant dense<1> : tensor<i32>
    %50 = stablehlo.broadcast_in_dim %c_0, dims = [] : (tensor<i32>) -> tensor<2xi32>
    %51 = stablehlo.add %49, %50 : tensor<2xi32>
    %52 = stablehlo.slice %arg21 [0:2, 2:3] : (tensor<2x4xi32>) -> tensor<2x1xi32>
    %53 = stablehlo.reshape %52 : (tensor<2x1xi32>) -> tensor<2xi32>
    %54 = stablehlo.compare EQ, %51, %53, SIGNED : (tensor<2xi32>, tensor<2xi32>) -> tensor<2xi1>
    %55 = stablehlo.slice %arg21 [0:2, 1:2] : (tensor<2x4xi32>) -> tensor<2x1xi32>
    %56 = stablehlo.reshape %55 : (tensor<2x1xi32>) -> tensor<2xi32>
    %57 = stablehlo.compare EQ, %47, %56, SIGNED : (tensor<2xi32>, tensor<2xi32>) -> tensor<2xi1>
    %58 = call @_where_12(%57, %arg16, %arg17) : (tensor<2xi1>, tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
    %59 = call @_where_13(%54, %58, %arg18) : (tensor<2xi1>, tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
    %60 = call @_where_12(%54, %arg19, %arg20) : (tensor<2xi1>, tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
    %61 = stablehlo.slice %arg21 [0:2, 1:2] : (tensor<2x4xi32>) -> tensor<2x1xi32>
    %62 = stablehlo.reshape %61 : (tensor<2x1xi32>) -> tensor<2xi32>
    %63 = stablehlo.slice %arg21 [0:2, 2:3] : (tensor<2x4xi32>) -> tensor<2x1xi32>
    %64 = stablehlo.reshape %63 : (tensor<2x1xi32>) -> tensor<2xi32>
    %65 = stablehlo.broadcast_in_dim %51, dims = [1] : (tensor<2xi32>) -> tensor<1x2xi32>
    %66 = stablehlo.broadcast_in_dim %62, dims = [1] : (tensor<2xi32>) -> tensor<1x2xi32>
    %67 = stablehlo.broadcast_in_dim %64, dims = [1] : (tensor<2xi32>) -> tensor<1x2xi32>
    %68 = stablehlo.broadcast_in_dim %47, dims = [1] : (tensor<2xi32>) -> tensor<1x2xi32>
    %69 = stablehlo.concatenate %65, %66, %67, %68, dim = 0 : (tensor<1x2xi32>, tensor<1x2xi32>, tensor<1x2xi32>, tensor<1x2xi32>) -> tensor<4x2xi32>
    %70 = call @_randint_14(%2, %arg1, %arg2, %arg3) : (tensor<2x2xui32>, tensor<i32>, tensor<ui32>, tensor<ui32>) -> tensor<2xi32>
    %71 = stablehlo.broadcast_in_dim %arg0, dims = [0] : (tensor<2xi32>) -> tensor<2x1xi32>
    %72 = stablehlo.broadcast_in_dim %70, dims = [0] : (tensor<2xi32>) -> tensor<2x1xi32>
    %73 = stablehlo.broadcast_in_dim %arg4, dims = [0] : (tensor<2xi32>) -> tensor<2x1xi32>
    %74 = stablehlo.broadcast_in_dim %arg5, dims = [0] : (tensor<2xi32>) -> tensor<2x1xi32>
    %75 = stablehlo.concatenate %71, %72, %73, %74, dim = 1 : (tensor<2x1xi32>, tensor<2x1xi32>, tensor<2x1xi32>, tensor<2x1xi32>) -> tensor<2x4xi32>
    %76 = call @_where_17(%54, %75, %69) : (tensor<2xi1>, tensor<2x4xi32>, tensor<4x2xi32>) -> tensor<2x4xi32>
    return %76, %40, %41, %59, %60, %31, %37, %35 : tensor<2x4xi32>, tensor<2x3xf32>, tensor<2xi32>, tensor<2xf32>, tensor<2xf32>, tensor<2x50xf32>, tensor<2x16xi1>, tensor<2x16xf32>
  }
  func.func private @_threefry_split_8(%arg0: tensor<2x2xui32>) -> tensor<2x3x2xui32> {
    %0 = stablehlo.slice %arg0 [0:2, 0:1] : (tensor<2x2xui32>) -> tensor<2x1xui32>
    %1 = stablehlo.reshape %0 : (tensor<2x1xui32>) -> tensor<2xui32>
    %2 = stablehlo.slice %arg0 [0:2, 1:2] : (tensor<2x2xui32>) -> tensor<2x1xui32>
    %3 = stablehlo.reshape %2 : (tensor<2x1xui32>) -> tensor<2xui32>
    %4 = stablehlo.iota dim = 0 : tensor<3xui64>
    %c = stablehlo.constant dense<1> : tensor<ui64>
    %5 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<ui64>) -> tensor<3xui64>
    %6 = stablehlo.multiply %5, %4 : tensor<3xui64>
    %c_0 = stablehlo.constant dense<32> : tensor<ui64>
    %7 = stablehlo.broadcast_in_dim %c_0, dims = [] : (tensor<ui64>) -> tensor<3xui64>
    %8 = stablehlo.shift_right_logical %6, %7 : tensor<3xui64>
    %9 = stablehlo.convert %6 : (tensor<3xui64>) -> tensor<3xui32>
    %10 = stablehlo.convert %8 : (tensor<3xui64>) -> tensor<3xui32>
    %11 = stablehlo.broadcast_in_dim %10, dims = [1] : (tensor<3xui32>) -> tensor<1x3xui32>
    %12 = stablehlo.broadcast_in_dim %9, dims = [1] : (tensor<3xui32>) -> tensor<1x3xui32>
    %13 = stablehlo.broadcast_in_dim %1, dims = [0] : (tensor<2xui32>) -> tensor<2x1xui32>
    %14 = stablehlo.broadcast_in_dim %3, dims = [0] : (tensor<2xui32>) -> tensor<2x1xui32>
    %15:2 = call @threefry2x32_9(%13, %14, %11, %12) : (tensor<2x1xui32>, tensor<2x1xui32>, tensor<1x3xui32>, tensor<1x3xui32>) -> (tensor<2x3xui32>, tensor<2x3xui32>)
    %16 = stablehlo.broadcast_in_dim %15#0, dims = [0, 1] : (tensor<2x3xui32>) -> tensor<2x3x1xui32>
    %17 = stablehlo.broadcast_in_dim %15#1, dims = [0, 1] : (tensor<2x3xui32>) -> tensor<2x3x1xui32>
    %18 = stablehlo.concatenate %16, %17, dim = 2 : (tensor<2x3x1xui32>, tensor<2x3x1xui32>) -> tensor<2x3x2xui32>
    return %18 : tensor<2x3x2xui32>
  }
  func.func private @threefry2x32_9(%arg0: tensor<2x1xui32>, %arg1: tensor<2x1xui32>, %arg2: tensor<1x3xui32>, %arg3: tensor<1x3xui32>) -> (tensor<2x3xui32>, tensor<2x3xui32>) {
    %c = stablehlo.constant dense<[13, 15, 26, 6]> : tensor<4xui32>
    %c_0 = stablehlo.constant dense<[17, 29, 16, 24]> : tensor<4xui32>
    %0 = stablehlo.xor %arg0, %arg1 : tensor<2x1xui32>
    %c_1 = stablehlo.constant dense<466688986> : tensor<ui32>
    %1 = stablehlo.broadcast_in_dim %c_1, dims = [] : (tensor<ui32>) -> tensor<2x1xui32>
    %2 = stablehlo.xor %0, %1 : tensor<2x1xui32>
    %3 = stablehlo.broadcast_in_dim %arg2, dims = [0, 1] : (tensor<1x3xui32>) -> tensor<2x3xui32>
    %4 = stablehlo.broadcast_in_dim %arg0, dims = [0, 1] : (tensor<2x1xui32>) -> tensor<2x3xui32>
    %5 = stablehlo.add %3, %4 : tensor<2x3xui32>
    %6 = stablehlo.broadcast_in_dim %arg3, dims = [0, 1] : (tensor<1x3xui32>) -> tensor<2x3xui32>
    %7 = stablehlo.broadcast_in_dim %arg1, dims = [0, 1] : (tensor<2x1xui32>) -> tensor<2x3xui32>
    %8 = stablehlo.add %6, %7 : tensor<2x3xui32>
    %c_2 = stablehlo.constant dense<0> : tensor<i32>
    %c_3 = stablehlo.constant dense<0> : tensor<i32>
    %9:9 = stablehlo.while(%iterArg = %c_3, %iterArg_4 = %c_2, %iterArg_5 = %5, %iterArg_6 = %8, %iterArg_7 = %arg1, %iterArg_8 = %2, %iterArg_9 = %arg0, %iterArg_10 = %c, %iterArg_11 = %c_0) : tensor<i32>, tensor<i32>, tensor<2x3xui32>, tensor<2x3xui32>, tensor<2x1xui32>, tensor<2x1xui32>, tensor<2x1xui32>, tensor<4xui32>, tensor<4xui32>
    cond {
      %c_12 = stablehlo.constant dense<5> : tensor<i32>
      %10 = stablehlo.compare LT, %iterArg, %c_12, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %10 : tensor<i1>
    } do {
      %10:8 = func.call @closed_call_10(%iterArg_4, %iterArg_5, %iterArg_6, %iterArg_7, %iterArg_8, %iterArg_9, %iterArg_10, %iterArg_11) : (tensor<i32>, tensor<2x3xui32>, tensor<2x3xui32>, tensor<2x1xui32>, tensor<2x1xui32>, tensor<2x1xui32>, tensor<4xui32>, tensor<4xui32>) -> (tensor<i32>, tensor<2x3xui32>, tensor<2x3xui32>, tensor<2x1xui32>, tensor<2x1xui32>, tensor<2x1xui32>, tensor<4xui32>, tensor<4xui32>)
      %c_12 = stablehlo.constant dense<1> : tensor<i32>
      %11 = stablehlo.add %iterArg, %c_12 : tensor<i32>
      stablehlo.return %11, %10#0, %10#1, %10#2, %10#3, %10#4, %10#5, %10#6, %10#7 : tensor<i32>, tensor<i32>, tensor<2x3xui32>, tensor<2x3xui32>, tensor<2x1xui32>, tensor<2x1xui32>, tensor<2x1xui32>, tensor<4xui32>, tensor<4xui32>
    }
    return %9#2, %9#3 : tensor<2x3xui32>, tensor<2x3xui32>
  }
  func.func private @closed_call_10(%arg0: tensor<i32>, %arg1: tensor<2x3xui32>, %arg2: tensor<2x3xui32>, %arg3: tensor<2x1xui32>, %arg4: tensor<2x1xui32>, %arg5: tensor<2x1xui32>, %arg6: tensor<4xui32>, %arg7: tensor<4xui32>) -> (tensor<i32>, tensor<2x3xui32>, tensor<2x3xui32>, tensor<2x1xui32>, tensor<2x1xui32>, tensor<2x1xui32>, tensor<4xui32>, tensor<4xui32>) {
    %c = stablehlo.constant dense<1> : tensor<i32>
    %0 = stablehlo.add %arg0, %c : tensor<i32>
    %1 = stablehlo.slice %arg6 [0:1] : (tensor<4xui32>) -> tensor<1xui32>
    %2 = stablehlo.reshape %1 : (tensor<1xui32>) -> tensor<ui32>
    %3 = stablehlo.add %arg1, %arg2 : tensor<2x3xui32>
    %4 = stablehlo.broadcast_in_dim %2, dims = [] : (tensor<ui32>) -> tensor<2x3xui32>
    %5 = stablehlo.shift_left %arg2, %4 : tensor<2x3xui32>
    %c_0 = stablehlo.constant dense<32> : tensor<ui32>
    %6 = stablehlo.subtract %c_0, %2 : tensor<ui32>
    %7 = stablehlo.broadcast_in_dim %6, dims = [] : (tensor<ui32>) -> tensor<2x3xui32>
    %8 = stablehlo.shift_right_logical %arg2, %7 : tensor<2x3xui32>
    %9 = stablehlo.or %5, %8 : tensor<2x3xui32>
    %10 = stablehlo.xor %3, %9 : tensor<2x3xui32>
    %11 = stablehlo.slice %arg6 [1:2] : (tensor<4xui32>) -> tensor<1xui32>
    %12 = stablehlo.reshape %11 : (tensor<1xui32>) -> tensor<ui32>
    %13 = stablehlo.add %3, %10 : tensor<2x3xui32>
    %14 = stablehlo.broadcast_in_dim %12, dims = [] : (tensor<ui32>) -> tensor<2x3xui32>
    %15 = stablehlo.shift_left %10, %14 : tensor<2x3xui32>
    %c_1 = stablehlo.constant dense<32> : tensor<ui32>
    %16 = stablehlo.subtract %c_1, %12 : tensor<ui32>
    %17 = stablehlo.broadcast_in_dim %16, dims = [] : (tensor<ui32>) -> tensor<2x3xui32>
    %18 = stablehlo.shift_right_logical %10, %17 : tensor<2x3xui32>
    %19 = stablehlo.or %15, %18 : tensor<2x3xui32>
    %20 = stablehlo.xor %13, %19 : tensor<2x3xui32>
    %21 = stablehlo.slice %arg6 [2:3] : (tensor<4xui32>) -> tensor<1xui32>
    %22 = stablehlo.reshape %21 : (tensor<1xui32>) -> tensor<ui32>
    %23 = stablehlo.add %13, %20 : tensor<2x3xui32>
    %24 = stablehlo.broadcast_in_dim %22, dims = [] : (tensor<ui32>) -> tensor<2x3xui32>
    %25 = stablehlo.shift_left %20, %24 : tensor<2x3xui32>
    %c_2 = stablehlo.constant dense<32> : tensor<ui32>
    %26 = stablehlo.subtract %c_2, %22 : tensor<ui32>
    %27 = stablehlo.broadcast_in_dim %26, dims = [] : (tensor<ui32>) -> tensor<2x3xui32>
    %28 = stablehlo.shift_right_logical %20, %27 : tensor<2x3xui32>
    %29 = stablehlo.or %25, %28 : tensor<2x3xui32>
    %30 = stablehlo.xor %23, %29 : tensor<2x3xui32>
    %31 = stablehlo.slice %arg6 [3:4] : (tensor<4xui32>) -> tensor<1xui32>
    %32 = stablehlo.reshape %31 : (tensor<1xui32>) -> tensor<ui32>
    %33 = stablehlo.add %23, %30 : tensor<2x3xui32>
    %34 = stablehlo.broadcast_in_dim %32, dims = [] : (tensor<ui32>) -> tensor<2x3xui32>
    %35 = stablehlo.shift_left %30, %34 : tensor<2x3xui32>
    %c_3 = stablehlo.constant dense<32> : tensor<ui32>
    %36 = stablehlo.subtract %c_3, %32 : tensor<ui32>
    %37 = stablehlo.broadcast_in_dim %36, dims = [] : (tensor<ui32>) -> tensor<2x3xui32>
    %38 = stablehlo.shift_right_logical %30, %37 : tensor<2x3xui32>
    %39 = stablehlo.or %35, %38 : tensor<2x3xui32>
    %40 = stablehlo.xor %33, %39 : tensor<2x3xui32>
    %41 = stablehlo.broadcast_in_dim %arg3, dims = [0, 1] : (tensor<2x1xui32>) -> tensor<2x3xui32>
    %42 = stablehlo.add %33, %41 : tensor<2x3xui32>
    %43 = stablehlo.broadcast_in_dim %arg4, dims = [0, 1] : (tensor<2x1xui32>) -> tensor<2x3xui32>
    %44 = stablehlo.add %40, %43 : tensor<2x3xui32>
    %c_4 = stablehlo.constant dense<1> : tensor<i32>
    %45 = stablehlo.add %arg0, %c_4 : tensor<i32>
    %46 = stablehlo.convert %45 : (tensor<i32>) -> tensor<ui32>
    %47 = stablehlo.broadcast_in_dim %46, dims = [] : (tensor<ui32>) -> tensor<2x3xui32>
    %48 = stablehlo.add %44, %47 : tensor<2x3xui32>
    return %0, %42, %48, %arg4, %arg5, %arg3, %arg7, %arg6 : tensor<i32>, tensor<2x3xui32>, tensor<2x3xui32>, tensor<2x1xui32>, tensor<2x1xui32>, tensor<2x1xui32>, tensor<4xui32>, tensor<4xui32>
  }
  func.func private @relu(%arg0: tensor<2x16xf32>) -> tensor<2x16xf32> {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<2x16xf32>
    %1 = stablehlo.maximum %arg0, %0 : tensor<2x16xf32>
    return %1 : tensor<2x16xf32>
  }
  func.func private @argmax(%arg0: tensor<2x3xf32>) -> tensor<2xi32> {
    %0 = stablehlo.iota dim = 1 : tensor<2x3xi32>
    %cst = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %1:2 = stablehlo.reduce(%arg0 init: %cst), (%0 init: %c) across dimensions = [1] : (tensor<2x3xf32>, tensor<2x3xi32>, tensor<f32>, tensor<i32>) -> (tensor<2xf32>, tensor<2xi32>)
     reducer(%arg1: tensor<f32>, %arg3: tensor<f32>) (%arg2: tensor<i32>, %arg4: tensor<i32>)  {
      %2 = stablehlo.compare GT, %arg1, %arg3, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %3 = stablehlo.compare NE, %arg1, %arg1, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %4 = stablehlo.or %2, %3 : tensor<i1>
      %5 = stablehlo.compare EQ, %arg1, %arg3, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %6 = stablehlo.compare LT, %arg2, %arg4, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %7 = stablehlo.and %5, %6 : tensor<i1>
      %8 = stablehlo.or %4, %7 : tensor<i1>
      %9 = stablehlo.select %4, %arg1, %arg3 : tensor<i1>, tensor<f32>
      %10 = stablehlo.select %8, %arg2, %arg4 : tensor<i1>, tensor<i32>
      stablehlo.return %9, %10 : tensor<f32>, tensor<i32>
    }
    return %1#1 : tensor<2xi32>
  }
  func.func private @clip_11(%arg0: tensor<2xi32>, %arg1: tensor<i32>, %arg2: tensor<i32>) -> tensor<2xi32> {
    %0 = stablehlo.broadcast_in_dim %arg2, dims = [] : (tensor<i32>) -> tensor<2xi32>
    %1 = stablehlo.maximum %0, %arg0 : tensor<2xi32>
    %2 = stablehlo.broadcast_in_dim %arg1, dims = [] : (tensor<i32>) -> tensor<2xi32>
    %3 = stablehlo.minimum %2, %1 : tensor<2xi32>
    return %3 : tensor<2xi32>
  }
  func.func private @_where_12(%arg0: tensor<2xi1>, %arg1: tensor<2xf32>, %arg2: tensor<2xf32>) -> tensor<2xf32> {
    %0 = stablehlo.select %arg0, %arg2, %arg1 : tensor<2xi1>, tensor<2xf32>
    return %0 : tensor<2xf32>
  }
  func.func private @_where_13(%arg0: tensor<2xi1>, %arg1: tensor<2xf32>, %arg2: tensor<2xf32>) -> tensor<2xf32> {
    %0 = stablehlo.select %arg0, %arg1, %arg2 : tensor<2xi1>, tensor<2xf32>
    return %0 : tensor<2xf32>
  }
  func.func private @_randint_14(%arg0: tensor<2x2xui32>, %arg1: tensor<i32>, %arg2: tensor<ui32>, %arg3: tensor<ui32>) -> tensor<2xi32> {
    %0 = call @_threefry_split(%arg0) : (tensor<2x2xui32>) -> tensor<2x2x2xui32>
    %1 = stablehlo.slice %0 [0:2, 0:1, 0:2] : (tensor<2x2x2xui32>) -> tensor<2x1x2xui32>
    %2 = stablehlo.reshape %1 : (tensor<2x1x2xui32>) -> tensor<2x2xui32>
    %3 = stablehlo.slice %0 [0:2, 1:2, 0:2] : (tensor<2x2x2xui32>) -> tensor<2x1x2xui32>
    %4 = stablehlo.reshape %3 : (tensor<2x1x2xui32>) -> tensor<2x2xui32>
    %5 = stablehlo.slice %2 [0:2, 0:1] : (tensor<2x2xui32>) -> tensor<2x1xui32>
    %6 = stablehlo.reshape %5 : (tensor<2x1xui32>) -> tensor<2xui32>
    %7 = stablehlo.slice %2 [0:2, 1:2] : (tensor<2x2xui32>) -> tensor<2x1xui32>
    %8 = stablehlo.reshape %7 : (tensor<2x1xui32>) -> tensor<2xui32>
    %c = stablehlo.constant dense<0> : tensor<ui32>
    %c_0 = stablehlo.constant dense<0> : tensor<ui32>
    %9:2 = call @threefry2x32_15(%6, %8, %c, %c_0) : (tensor<2xui32>, tensor<2xui32>, tensor<ui32>, tensor<ui32>) -> (tensor<2xui32>, tensor<2xui32>)
    %10 = stablehlo.xor %9#0, %9#1 : tensor<2xui32>
    %11 = stablehlo.slice %4 [0:2, 0:1] : (tensor<2x2xui32>) -> tensor<2x1xui32>
    %12 = stablehlo.reshape %11 : (tensor<2x1xui32>) -> tensor<2xui32>
    %13 = stablehlo.slice %4 [0:2, 1:2] : (tensor<2x2xui32>) -> tensor<2x1xui32>
    %14 = stablehlo.reshape %13 : (tensor<2x1xui32>) -> tensor<2xui32>
    %c_1 = stablehlo.constant dense<0> : tensor<ui32>
    %c_2 = stablehlo.constant dense<0> : tensor<ui32>
    %15:2 = call @threefry2x32_15(%12, %14, %c_1, %c_2) : (tensor<2xui32>, tensor<2xui32>, tensor<ui32>, tensor<ui32>) -> (tensor<2xui32>, tensor<2xui32>)
    %16 = stablehlo.xor %15#0, %15#1 : tensor<2xui32>
    %17 = stablehlo.broadcast_in_dim %arg2, dims = [] : (tensor<ui32>) -> tensor<2xui32>
    %18 = stablehlo.remainder %10, %17 : tensor<2xui32>
    %19 = stablehlo.broadcast_in_dim %arg3, dims = [] : (tensor<ui32>) -> tensor<2xui32>
    %20 = stablehlo.multiply %18, %19 : tensor<2xui32>
    %21 = stablehlo.broadcast_in_dim %arg2, dims = [] : (tensor<ui32>) -> tensor<2xui32>
    %22 = stablehlo.remainder %16, %21 : tensor<2xui32>
    %23 = stablehlo.add %20, %22 : tensor<2xui32>
    %24 = stablehlo.broadcast_in_dim %arg2, dims = [] : (tensor<ui32>) -> tensor<2xui32>
    %25 = stablehlo.remainder %23, %24 : tensor<2xui32>
    %26 = stablehlo.convert %25 : (tensor<2xui32>) -> tensor<2xi32>
    %27 = stablehlo.broadcast_in_dim %arg1, dims = [] : (tensor<i32>) -> tensor<2xi32>
    %28 = stablehlo.add %27, %26 : tensor<2xi32>
    return %28 : tensor<2xi32>
  }
  func.func private @threefry2x32_15(%arg0: tensor<2xui32>, %arg1: tensor<2xui32>, %arg2: tensor<ui32>, %arg3: tensor<ui32>) -> (tensor<2xui32>, tensor<2xui32>) {
    %c = stablehlo.constant dense<[13, 15, 26, 6]> : tensor<4xui32>
    %c_0 = stablehlo.constant dense<[17, 29, 16, 24]> : tensor<4xui32>
    %0 = stablehlo.xor %arg0, %arg1 : tensor<2xui32>
    %c_1 = stablehlo.constant dense<466688986> : tensor<ui32>
    %1 = stablehlo.broadcast_in_dim %c_1, dims = [] : (tensor<ui32>) -> tensor<2xui32>
    %2 = stablehlo.xor %0, %1 : tensor<2xui32>
    %3 = stablehlo.broadcast_in_dim %arg2, dims = [] : (tensor<ui32>) -> tensor<2xui32>
    %4 = stablehlo.add %3, %arg0 : tensor<2xui32>
    %5 = stablehlo.broadcast_in_dim %arg3, dims = [] : (tensor<ui32>) -> tensor<2xui32>
    %6 = stablehlo.add %5, %arg1 : tensor<2xui32>
    %c_2 = stablehlo.constant dense<0> : tensor<i32>
    %c_3 = stablehlo.constant dense<0> : tensor<i32>
    %7:9 = stablehlo.while(%iterArg = %c_3, %iterArg_4 = %c_2, %iterArg_5 = %4, %iterArg_6 = %6, %iterArg_7 = %arg1, %iterArg_8 = %2, %iterArg_9 = %arg0, %iterArg_10 = %c, %iterArg_11 = %c_0) : tensor<i32>, tensor<i32>, tensor<2xui32>, tensor<2xui32>, tensor<2xui32>, tensor<2xui32>, tensor<2xui32>, tensor<4xui32>, tensor<4xui32>
    cond {
      %c_12 = stablehlo.constant dense<5> : tensor<i32>
      %8 = stablehlo.compare LT, %iterArg, %c_12, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %8 : tensor<i1>
    } do {
      %8:8 = func.call @closed_call_16(%iterArg_4, %iterArg_5, %iterArg_6, %iterArg_7, %iterArg_8, %iterArg_9, %iterArg_10, %iterArg_11) : (tensor<i32>, tensor<2xui32>, tensor<2xui32>, tensor<2xui32>, tensor<2xui32>, tensor<2xui32>, tensor<4xui32>, tensor<4xui32>) -> (tensor<i32>, tensor<2xui32>, tensor<2xui32>, tensor<2xui32>, tensor<2xui32>, tensor<2xui32>, tensor<4xui32>, tensor<4xui32>)
      %c_12 = stablehlo.constant dense<1> : tensor<i32>
      %9 = stablehlo.add %iterArg, %c_12 : tensor<i32>
      stablehlo.return %9, %8#0, %8#1, %8#2, %8#3, %8#4, %8#5, %8#6, %8#7 : tensor<i32>, tensor<i32>, tensor<2xui32>, tensor<2xui32>, tensor<2xui32>, tensor<2xui32>, tensor<2xui32>, tensor<4xui32>, tensor<4xui32>
    }
    return %7#2, %7#3 : tensor<2xui32>, tensor<2xui32>
  }
  func.func private @closed_call_16(%arg0: tensor<i32>, %arg1: tensor<2xui32>, %arg2: tensor<2xui32>, %arg3: tensor<2xui32>, %arg4: tensor<2xui32>, %arg5: tensor<2xui32>, %arg6: tensor<4xui32>, %arg7: tensor<4xui32>) -> (tensor<i32>, tensor<2xui32>, tensor<2xui32>, tensor<2xui32>, tensor<2xui32>, tensor<2xui32>, tensor<4xui32>, tensor<4xui32>) {
    %c = stablehlo.constant dense<1> : tensor<i32>
    %0 = stablehlo.add %arg0, %c : tensor<i32>
    %1 = stablehlo.slice %arg6 [0:1] : (tensor<4xui32>) -> tensor<1xui32>
    %2 = stablehlo.reshape %1 : (tensor<1xui32>) -> tensor<ui32>
    %3 = stablehlo.add %arg1, %arg2 : tensor<2xui32>
    %4 = stablehlo.broadcast_in_dim %2, dims = [] : (tensor<ui32>) -> tensor<2xui32>
    %5 = stablehlo.shift_left %arg2, %4 : tensor<2xui32>
    %c_0 = stablehlo.constant dense<32> : tensor<ui32>
    %6 = stablehlo.subtract %c_0, %2 : tensor<ui32>
    %7 = stablehlo.broadcast_in_dim %6, dims = [] : (tensor<ui32>) -> tensor<2xui32>
    %8 = stablehlo.shift_right_logical %arg2, %7 : tensor<2xui32>
    %9 = stablehlo.or %5, %8 : tensor<2xui32>
    %10 = stablehlo.xor %3, %9 : tensor<2xui32>
    %11 = stablehlo.slice %arg6 [1:2] : (tensor<4xui32>) -> tensor<1xui32>
    %12 = stablehlo.reshape %11 : (tensor<1xui32>) -> tensor<ui32>
    %13 = stablehlo.add %3, %10 : tensor<2xui32>
    %14 = stablehlo.broadcast_in_dim %12, dims = [] : (tensor<ui32>) -> tensor<2xui32>
    %15 = stablehlo.shift_left %10, %14 : tensor<2xui32>
    %c_1 = stablehlo.constant dense<32> : tensor<ui32>
    %16 = stablehlo.subtract %c_1, %12 : tensor<ui32>
    %17 = stablehlo.broadcast_in_dim %16, dims = [] : (tensor<ui32>) -> tensor<2xui32>
    %18 = stablehlo.shift_right_logical %10, %17 : tensor<2xui32>
    %19 = stablehlo.or %15, %18 : tensor<2xui32>
    %20 = stablehlo.xor %13, %19 : tensor<2xui32>
    %21 = stablehlo.slice %arg6 [2:3] : (tensor<4xui32>) -> tensor<1xui32>
    %22 = stablehlo.reshape %21 : (tensor<1xui32>) -> tensor<ui32>
    %23 = stablehlo.add %13, %20 : tensor<2xui32>
    %24 = stablehlo.broadcast_in_dim %22, dims = [] : (tensor<ui32>) -> tensor<2xui32>
    %25 = stablehlo.shift_left %20, %24 : tensor<2xui32>
    %c_2 = stablehlo.constant dense<32> : tensor<ui32>
    %26 = stablehlo.subtract %c_2, %22 : tensor<ui32>
    %27 = stablehlo.broadcast_in_dim %26, dims = [] : (tensor<ui32>) -> tensor<2xui32>
    %28 = stablehlo.shift_right_logical %20, %27 : tensor<2xui32>
    %29 = stablehlo.or %25, %28 : tensor<2xui32>
    %30 = stablehlo.xor %23, %29 : tensor<2xui32>
    %31 = stablehlo.slice %arg6 [3:4] : (tensor<4xui32>) -> tensor<1xui32>
    %32 = stablehlo.reshape %31 : (tensor<1xui32>) -> tensor<ui32>
    %33 = stablehlo.add %23, %30 : tensor<2xui32>
    %34 = stablehlo.broadcast_in_dim %32, dims = [] : (tensor<ui32>) -> tensor<2xui32>
    %35 = stablehlo.shift_left %30, %34 : tensor<2xui32>
    %c_3 = stablehlo.constant dense<32> : tensor<ui32>
    %36 = stablehlo.subtract %c_3, %32 : tensor<ui32>
    %37 = stablehlo.broadcast_in_dim %36, dims = [] : (tensor<ui32>) -> tensor<2xui32>
    %38 = stablehlo.shift_right_logical %30, %37 : tensor<2xui32>
    %39 = stablehlo.or %35, %38 : tensor<2xui32>
    %40 = stablehlo.xor %33, %39 : tensor<2xui32>
    %41 = stablehlo.add %33, %arg3 : tensor<2xui32>
    %42 = stablehlo.add %40, %arg4 : tensor<2xui32>
    %c_4 = stablehlo.constant dense<1> : tensor<i32>
    %43 = stablehlo.add %arg0, %c_4 : tensor<i32>
    %44 = stablehlo.convert %43 : (tensor<i32>) -> tensor<ui32>
    %45 = stablehlo.broadcast_in_dim %44, dims = [] : (tensor<ui32>) -> tensor<2xui32>
    %46 = stablehlo.add %42, %45 : tensor<2xui32>
    return %0, %41, %46, %arg4, %arg5, %arg3, %arg7, %arg6 : tensor<i32>, tensor<2xui32>, tensor<2xui32>, tensor<2xui32>, tensor<2xui32>, tensor<2xui32>, tensor<4xui32>, tensor<4xui32>
  }
  func.func private @_where_17(%arg0: tensor<2xi1>, %arg1: tensor<2x4xi32>, %arg2: tensor<4x2xi32>) -> tensor<2x4xi32> {
    %0 = stablehlo.transpose %arg2, dims = [1, 0] : (tensor<4x2xi32>) -> tensor<2x4xi32>
    %1 = stablehlo.broadcast_in_dim %arg0, dims = [0] : (tensor<2xi1>) -> tensor<2x4xi1>
    %2 = stablehlo.select %1, %arg1, %0 : tensor<2x4xi1>, tensor<2x4xi32>
    return %2 : tensor<2x4xi32>
  }
  func.func private @dynamic_update_index_in_dim(%arg0: tensor<4x2x3xf32>, %arg1: tensor<2x3xf32>, %arg2: tensor<i32>) -> tensor<4x2x3xf32> {
    %0 = stablehlo.broadcast_in_dim %arg1, dims = [1, 2] : (tensor<2x3xf32>) -> tensor<1x2x3xf32>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    %1 = stablehlo.dynamic_update_slice %arg0, %0, %arg2, %c, %c_0 : (tensor<4x2x3xf32>, tensor<1x2x3xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<4x2x3xf32>
    return %1 : tensor<4x2x3xf32>
  }
  func.func private @dynamic_update_index_in_dim_18(%arg0: tensor<4x2xi32>, %arg1: tensor<2xi32>, %arg2: tensor<i32>) -> tensor<4x2xi32> {
    %0 = stablehlo.broadcast_in_dim %arg1, dims = [1] : (tensor<2xi32>) -> tensor<1x2xi32>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %1 = stablehlo.dynamic_update_slice %arg0, %0, %arg2, %c : (tensor<4x2xi32>, tensor<1x2xi32>, tensor<i32>, tensor<i32>) -> tensor<4x2xi32>
    return %1 : tensor<4x2xi32>
  }
  func.func private @dynamic_update_index_in_dim_19(%arg0: tensor<4x2xf32>, %arg1: tensor<2xf32>, %arg2: tensor<i32>) -> tensor<4x2xf32> {
    %0 = stablehlo.broadcast_in_dim %arg1, dims = [1] : (tensor<2xf32>) -> tensor<1x2xf32>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %1 = stablehlo.dynamic_update_slice %arg0, %0, %arg2, %c : (tensor<4x2xf32>, tensor<1x2xf32>, tensor<i32>, tensor<i32>) -> tensor<4x2xf32>
    return %1 : tensor<4x2xf32>
  }
  func.func private @dynamic_update_index_in_dim_20(%arg0: tensor<4x2x50xf32>, %arg1: tensor<2x50xf32>, %arg2: tensor<i32>) -> tensor<4x2x50xf32> {
    %0 = stablehlo.broadcast_in_dim %arg1, dims = [1, 2] : (tensor<2x50xf32>) -> tensor<1x2x50xf32>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    %1 = stablehlo.dynamic_update_slice %arg0, %0, %arg2, %c, %c_0 : (tensor<4x2x50xf32>, tensor<1x2x50xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<4x2x50xf32>
    return %1 : tensor<4x2x50xf32>
  }
  func.func private @dynamic_update_index_in_dim_21(%arg0: tensor<4x2x16xi1>, %arg1: tensor<2x16xi1>, %arg2: tensor<i32>) -> tensor<4x2x16xi1> {
    %0 = stablehlo.broadcast_in_dim %arg1, dims = [1, 2] : (tensor<2x16xi1>) -> tensor<1x2x16xi1>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    %1 = stablehlo.dynamic_update_slice %arg0, %0, %arg2, %c, %c_0 : (tensor<4x2x16xi1>, tensor<1x2x16xi1>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<4x2x16xi1>
    return %1 : tensor<4x2x16xi1>
  }
  func.func private @dynamic_update_index_in_dim_22(%arg0: tensor<4x2x16xf32>, %arg1: tensor<2x16xf32>, %arg2: tensor<i32>) -> tensor<4x2x16xf32> {
    %0 = stablehlo.broadcast_in_dim %arg1, dims = [1, 2] : (tensor<2x16xf32>) -> tensor<1x2x16xf32>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    %1 = stablehlo.dynamic_update_slice %arg0, %0, %arg2, %c, %c_0 : (tensor<4x2x16xf32>, tensor<1x2x16xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<4x2x16xf32>
    return %1 : tensor<4x2x16xf32>
  }
  func.func private @take_along_axis(%arg0: tensor<3x2x3xf32>, %arg1: tensor<2x3x1xi32>) -> (tensor<2x3x1xf32>, tensor<2x3x1x1xi32>) {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i32>) -> tensor<2x3x1xi32>
    %1 = stablehlo.compare LT, %arg1, %0, SIGNED : (tensor<2x3x1xi32>, tensor<2x3x1xi32>) -> tensor<2x3x1xi1>
    %c_0 = stablehlo.constant dense<3> : tensor<i32>
    %2 = stablehlo.broadcast_in_dim %c_0, dims = [] : (tensor<i32>) -> tensor<2x3x1xi32>
    %3 = stablehlo.add %arg1, %2 : tensor<2x3x1xi32>
    %4 = stablehlo.select %1, %3, %arg1 : tensor<2x3x1xi1>, tensor<2x3x1xi32>
    %5 = stablehlo.reshape %4 : (tensor<2x3x1xi32>) -> tensor<2x3x1x1xi32>
    %6 = stablehlo.transpose %arg0, dims = [1, 0, 2] : (tensor<3x2x3xf32>) -> tensor<2x3x3xf32>
    %c_1 = stablehlo.constant dense<2> : tensor<1xi32>
    %c_2 = stablehlo.constant dense<0> : tensor<i32>
    %7 = stablehlo.broadcast_in_dim %c_2, dims = [] : (tensor<i32>) -> tensor<2x3x1x1xi32>
    %8 = stablehlo.compare GE, %5, %7, SIGNED : (tensor<2x3x1x1xi32>, tensor<2x3x1x1xi32>) -> tensor<2x3x1x1xi1>
    %9 = stablehlo.broadcast_in_dim %c_1, dims = [3] : (tensor<1xi32>) -> tensor<1x1x1x1xi32>
    %10 = stablehlo.broadcast_in_dim %9, dims = [0, 1, 2, 3] : (tensor<1x1x1x1xi32>) -> tensor<2x3x1x1xi32>
    %11 = stablehlo.compare LE, %5, %10, SIGNED : (tensor<2x3x1x1xi32>, tensor<2x3x1x1xi32>) -> tensor<2x3x1x1xi1>
    %12 = stablehlo.and %8, %11 : tensor<2x3x1x1xi1>
    %c_3 = stablehlo.constant dense<true> : tensor<i1>
    %13 = stablehlo.reduce(%12 init: %c_3) applies stablehlo.and across dimensions = [3] : (tensor<2x3x1x1xi1>, tensor<i1>) -> tensor<2x3x1xi1>
    %14 = "stablehlo.gather"(%6, %5) <{dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [2], operand_batching_dims = [0, 1], start_indices_batching_dims = [0, 1], start_index_map = [2], index_vector_dim = 3>, indices_are_sorted = false, slice_sizes = array<i64: 1, 1, 1>}> : (tensor<2x3x3xf32>, tensor<2x3x1x1xi32>) -> tensor<2x3x1xf32>
    %cst = stablehlo.constant dense<0x7FC00000> : tensor<f32>
    %15 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<2x3x1xf32>
    %16 = stablehlo.select %13, %14, %15 : tensor<2x3x1xi1>, tensor<2x3x1xf32>
    return %16, %5 : tensor<2x3x1xf32>, tensor<2x3x1x1xi32>
  }
  func.func private @dynamic_index_in_dim_23(%arg0: tensor<3x2xf32>, %arg1: tensor<i32>) -> tensor<2xf32> {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.dynamic_slice %arg0, %arg1, %c, sizes = [1, 2] : (tensor<3x2xf32>, tensor<i32>, tensor<i32>) -> tensor<1x2xf32>
    %1 = stablehlo.reshape %0 : (tensor<1x2xf32>) -> tensor<2xf32>
    return %1 : tensor<2xf32>
  }
  func.func private @dynamic_index_in_dim_24(%arg0: tensor<3x2xf32>, %arg1: tensor<i32>) -> tensor<2xf32> {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.dynamic_slice %arg0, %arg1, %c, sizes = [1, 2] : (tensor<3x2xf32>, tensor<i32>, tensor<i32>) -> tensor<1x2xf32>
    %1 = stablehlo.reshape %0 : (tensor<1x2xf32>) -> tensor<2xf32>
    return %1 : tensor<2xf32>
  }
  func.func private @closed_call_25(%arg0: tensor<2xf32>, %arg1: tensor<2xf32>, %arg2: tensor<2xf32>, %arg3: tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>) {
    %cst = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<2xf32>
    %1 = stablehlo.multiply %0, %arg3 : tensor<2xf32>
    %cst_0 = stablehlo.constant dense<0.899999976> : tensor<f32>
    %2 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<2xf32>
    %3 = stablehlo.multiply %2, %arg0 : tensor<2xf32>
    %4 = stablehlo.add %1, %3 : tensor<2xf32>
    %5 = stablehlo.convert %arg2 : tensor<2xf32>
    %6 = stablehlo.multiply %5, %4 : tensor<2xf32>
    %7 = stablehlo.convert %arg1 : tensor<2xf32>
    %8 = stablehlo.add %7, %6 : tensor<2xf32>
    return %8, %8 : tensor<2xf32>, tensor<2xf32>
  }
  func.func private @dynamic_update_index_in_dim_26(%arg0: tensor<3x2xf32>, %arg1: tensor<2xf32>, %arg2: tensor<i32>) -> tensor<3x2xf32> {
    %0 = stablehlo.broadcast_in_dim %arg1, dims = [1] : (tensor<2xf32>) -> tensor<1x2xf32>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %1 = stablehlo.dynamic_update_slice %arg0, %0, %arg2, %c : (tensor<3x2xf32>, tensor<1x2xf32>, tensor<i32>, tensor<i32>) -> tensor<3x2xf32>
    return %1 : tensor<3x2xf32>
  }
  func.func private @take_along_axis_27(%arg0: tensor<2x3x1x1xi32>, %arg1: tensor<2x3x1xf32>) -> tensor<3x2x3xf32> {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<2x3x3xf32>
    %1 = "stablehlo.scatter"(%0, %arg0, %arg1) <{indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [2], input_batching_dims = [0, 1], scatter_indices_batching_dims = [0, 1], scatter_dims_to_operand_dims = [2], index_vector_dim = 3>, unique_indices = false}> ({
    ^bb0(%arg2: tensor<f32>, %arg3: tensor<f32>):
      %3 = stablehlo.add %arg2, %arg3 : tensor<f32>
      stablehlo.return %3 : tensor<f32>
    }) : (tensor<2x3x3xf32>, tensor<2x3x1x1xi32>, tensor<2x3x1xf32>) -> tensor<2x3x3xf32>
    %2 = stablehlo.transpose %1, dims = [1, 0, 2] : (tensor<2x3x3xf32>) -> tensor<3x2x3xf32>
    return %2 : tensor<3x2x3xf32>
  }
  func.func private @dynamic_index_in_dim_28(%arg0: tensor<4x2x3xf32>, %arg1: tensor<i32>) -> tensor<2x3xf32> {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.dynamic_slice %arg0, %arg1, %c, %c_0, sizes = [1, 2, 3] : (tensor<4x2x3xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x2x3xf32>
    %1 = stablehlo.reshape %0 : (tensor<1x2x3xf32>) -> tensor<2x3xf32>
    return %1 : tensor<2x3xf32>
  }
  func.func private @dynamic_index_in_dim_29(%arg0: tensor<4x2x50xf32>, %arg1: tensor<i32>) -> tensor<2x50xf32> {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.dynamic_slice %arg0, %arg1, %c, %c_0, sizes = [1, 2, 50] : (tensor<4x2x50xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x2x50xf32>
    %1 = stablehlo.reshape %0 : (tensor<1x2x50xf32>) -> tensor<2x50xf32>
    return %1 : tensor<2x50xf32>
  }
  func.func private @dynamic_index_in_dim_30(%arg0: tensor<4x2x16xi1>, %arg1: tensor<i32>) -> tensor<2x16xi1> {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.dynamic_slice %arg0, %arg1, %c, %c_0, sizes = [1, 2, 16] : (tensor<4x2x16xi1>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x2x16xi1>
    %1 = stablehlo.reshape %0 : (tensor<1x2x16xi1>) -> tensor<2x16xi1>
    return %1 : tensor<2x16xi1>
  }
  func.func private @dynamic_index_in_dim_31(%arg0: tensor<4x2x16xf32>, %arg1: tensor<i32>) -> tensor<2x16xf32> {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.dynamic_slice %arg0, %arg1, %c, %c_0, sizes = [1, 2, 16] : (tensor<4x2x16xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x2x16xf32>
    %1 = stablehlo.reshape %0 : (tensor<1x2x16xf32>) -> tensor<2x16xf32>
    return %1 : tensor<2x16xf32>
  }
  func.func private @closed_call_32(%arg0: tensor<16x3xf32>, %arg1: tensor<50x16xf32>, %arg2: tensor<16xf32>, %arg3: tensor<16x3xf32>, %arg4: tensor<3xf32>, %arg5: tensor<2x3xf32>, %arg6: tensor<2x50xf32>, %arg7: tensor<2x16xi1>, %arg8: tensor<2x16xf32>) -> (tensor<50x16xf32>, tensor<16xf32>, tensor<16x3xf32>, tensor<3xf32>) {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.reduce(%arg5 init: %cst) applies stablehlo.add across dimensions = [0] : (tensor<2x3xf32>, tensor<f32>) -> tensor<3xf32>
    %1 = stablehlo.reshape %0 : (tensor<3xf32>) -> tensor<1x3xf32>
    %cst_0 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %2 = stablehlo.reduce(%1 init: %cst_0) applies stablehlo.add across dimensions = [0] : (tensor<1x3xf32>, tensor<f32>) -> tensor<3xf32>
    %3 = stablehlo.add %arg4, %2 : tensor<3xf32>
    %4 = stablehlo.dot_general %arg5, %arg8, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x3xf32>, tensor<2x16xf32>) -> tensor<3x16xf32>
    %5 = stablehlo.transpose %4, dims = [1, 0] : (tensor<3x16xf32>) -> tensor<16x3xf32>
    %6 = stablehlo.add %arg3, %5 : tensor<16x3xf32>
    %7 = stablehlo.dot_general %arg5, %arg0, contracting_dims = [1] x [1], precision = [DEFAULT, DEFAULT] : (tensor<2x3xf32>, tensor<16x3xf32>) -> tensor<2x16xf32>
    %cst_1 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %8 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<f32>) -> tensor<2x16xf32>
    %9 = stablehlo.select %arg7, %7, %8 : tensor<2x16xi1>, tensor<2x16xf32>
    %cst_2 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %10 = stablehlo.reduce(%9 init: %cst_2) applies stablehlo.add across dimensions = [0] : (tensor<2x16xf32>, tensor<f32>) -> tensor<16xf32>
    %11 = stablehlo.reshape %10 : (tensor<16xf32>) -> tensor<1x16xf32>
    %cst_3 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %12 = stablehlo.reduce(%11 init: %cst_3) applies stablehlo.add across dimensions = [0] : (tensor<1x16xf32>, tensor<f32>) -> tensor<16xf32>
    %13 = stablehlo.add %arg2, %12 : tensor<16xf32>
    %14 = stablehlo.dot_general %9, %arg6, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x16xf32>, tensor<2x50xf32>) -> tensor<16x50xf32>
    %15 = stablehlo.transpose %14, dims = [1, 0] : (tensor<16x50xf32>) -> tensor<50x16xf32>
    %16 = stablehlo.add %arg1, %15 : tensor<50x16xf32>
    return %16, %13, %6, %3 : tensor<50x16xf32>, tensor<16xf32>, tensor<16x3xf32>, tensor<3xf32>
  }
}
