"""The ONNX node tests (shipped in the onnx wheel) that pass on the compiler's float CPU path,
by operator: the regression gate of ``tests/test_onnx_backend.py`` (data only; kept apart
from the tests so the lists can grow without the test file growing)."""

#: node tests (without ``test_`` and the device) that pass on the float CPU path, by operator.
PASSING = {
    "Abs": "abs",
    "Add": "add add_bcast add_int8",
    "ArgMax": "argmax_default_axis_example argmax_default_axis_random argmax_keepdims_example "
              "argmax_keepdims_random argmax_negative_axis_keepdims_example "
              "argmax_negative_axis_keepdims_random argmax_no_keepdims_example "
              "argmax_no_keepdims_random",
    "AveragePool": "averagepool_2d_ceil averagepool_2d_ceil_last_window_starts_on_pad "
                   "averagepool_2d_default averagepool_2d_pads "
                   "averagepool_2d_pads_count_include_pad averagepool_2d_precomputed_pads "
                   "averagepool_2d_precomputed_pads_count_include_pad "
                   "averagepool_2d_precomputed_same_upper averagepool_2d_precomputed_strides "
                   "averagepool_2d_same_lower averagepool_2d_same_upper averagepool_2d_strides",
    "BatchNormalization": "batchnorm_epsilon batchnorm_example",
    "Cast": "cast_BFLOAT16_to_FLOAT cast_DOUBLE_to_FLOAT cast_FLOAT16_to_FLOAT "
            "cast_FLOAT4E2M1_to_FLOAT cast_FLOAT8E4M3FNUZ_to_FLOAT cast_FLOAT8E4M3FN_to_FLOAT "
            "cast_FLOAT8E5M2FNUZ_to_FLOAT cast_FLOAT8E5M2_to_FLOAT cast_INT2_to_FLOAT "
            "cast_INT2_to_INT8 cast_INT4_to_FLOAT cast_INT4_to_INT8 cast_UINT2_to_FLOAT "
            "cast_UINT4_to_FLOAT cast_e8m0_FLOAT8E8M0_to_FLOAT",
    "Clip": "clip clip_default_inbounds clip_default_int8_inbounds clip_default_int8_max "
            "clip_default_int8_max_expanded clip_default_int8_min clip_default_int8_min_expanded "
            "clip_default_max clip_default_max_expanded clip_default_min clip_default_min_expanded "
            "clip_example clip_example_expanded clip_expanded clip_inbounds clip_inbounds_expanded "
            "clip_min_greater_than_max clip_min_greater_than_max_expanded clip_outbounds "
            "clip_outbounds_expanded clip_splitbounds clip_splitbounds_expanded",
    "Concat": "concat_1d_axis_0 concat_1d_axis_negative_1 concat_2d_axis_0 concat_2d_axis_1 "
              "concat_2d_axis_negative_1 concat_2d_axis_negative_2 concat_3d_axis_0 "
              "concat_3d_axis_1 concat_3d_axis_2 concat_3d_axis_negative_1 "
              "concat_3d_axis_negative_2 concat_3d_axis_negative_3",
    "Constant": "constant",
    "ConstantOfShape": "constantofshape_float_ones constantofshape_int_shape_zero "
                       "constantofshape_int_zeros",
    "Conv": "basic_conv_with_padding basic_conv_without_padding conv_with_autopad_same "
            "conv_with_strides_and_asymmetric_padding conv_with_strides_no_padding "
            "conv_with_strides_padding",
    "ConvTranspose": "convtranspose convtranspose_autopad_same convtranspose_dilations "
                     "convtranspose_group_2 convtranspose_group_2_image_3 "
                     "convtranspose_kernel_shape convtranspose_output_shape convtranspose_pad "
                     "convtranspose_pads",
    "DepthToSpace": "depthtospace_crd_mode_example depthtospace_crd_mode_example_expanded "
                    "depthtospace_example depthtospace_example_expanded",
    "DequantizeLinear": "dequantizelinear dequantizelinear_axis dequantizelinear_e4m3fn "
                        "dequantizelinear_e4m3fn_zero_point dequantizelinear_e5m2 "
                        "dequantizelinear_float4e2m1 dequantizelinear_int16 dequantizelinear_int2 "
                        "dequantizelinear_int4 dequantizelinear_uint16 dequantizelinear_uint2 "
                        "dequantizelinear_uint4",
    "Div": "div div_bcast div_example div_int32_trunc div_int8",
    "Elu": "elu elu_default elu_default_expanded_ver18 elu_example elu_example_expanded_ver18 "
           "elu_expanded_ver18",
    "Equal": "equal equal_bcast equal_int16 equal_int8 equal_string equal_string_broadcast "
             "equal_uint16 equal_uint32 equal_uint64 equal_uint8",
    "Erf": "erf",
    "Exp": "exp exp_example",
    "Expand": "expand_dim_changed expand_dim_unchanged",
    "Flatten": "flatten_axis0 flatten_axis1 flatten_axis2 flatten_axis3 flatten_default_axis "
               "flatten_negative_axis1 flatten_negative_axis2 flatten_negative_axis3 "
               "flatten_negative_axis4",
    "Gather": "gather_0 gather_1 gather_2d_indices gather_negative_indices",
    "Gelu": "gelu_default_1 gelu_default_1_expanded gelu_default_2 gelu_default_2_expanded "
            "gelu_tanh_1 gelu_tanh_1_expanded gelu_tanh_2 gelu_tanh_2_expanded",
    "Gemm": "gemm_all_attributes gemm_alpha gemm_beta gemm_default_matrix_bias "
            "gemm_default_no_bias gemm_default_scalar_bias gemm_default_single_elem_vector_bias "
            "gemm_default_vector_bias gemm_default_zero_bias gemm_transposeA gemm_transposeB",
    "GlobalAveragePool": "globalaveragepool globalaveragepool_precomputed",
    "Greater": "greater greater_bcast greater_int16 greater_int8 greater_uint16 greater_uint32 "
               "greater_uint64 greater_uint8",
    "HardSigmoid": "hardsigmoid hardsigmoid_default hardsigmoid_default_expanded_ver18 "
                   "hardsigmoid_example hardsigmoid_example_expanded_ver18 "
                   "hardsigmoid_expanded_ver18",
    "HardSwish": "hardswish hardswish_expanded",
    "InstanceNormalization": "instancenorm_epsilon instancenorm_example",
    "LayerNormalization": "layer_normalization_2d_axis0 layer_normalization_2d_axis0_expanded "
                          "layer_normalization_2d_axis0_expanded_ver18 "
                          "layer_normalization_2d_axis1 layer_normalization_2d_axis1_expanded "
                          "layer_normalization_2d_axis1_expanded_ver18 "
                          "layer_normalization_2d_axis_negative_1 "
                          "layer_normalization_2d_axis_negative_1_expanded "
                          "layer_normalization_2d_axis_negative_1_expanded_ver18 "
                          "layer_normalization_2d_axis_negative_2 "
                          "layer_normalization_2d_axis_negative_2_expanded "
                          "layer_normalization_2d_axis_negative_2_expanded_ver18 "
                          "layer_normalization_3d_axis0_epsilon "
                          "layer_normalization_3d_axis0_epsilon_expanded "
                          "layer_normalization_3d_axis0_epsilon_expanded_ver18 "
                          "layer_normalization_3d_axis1_epsilon "
                          "layer_normalization_3d_axis1_epsilon_expanded "
                          "layer_normalization_3d_axis1_epsilon_expanded_ver18 "
                          "layer_normalization_3d_axis2_epsilon "
                          "layer_normalization_3d_axis2_epsilon_expanded "
                          "layer_normalization_3d_axis2_epsilon_expanded_ver18 "
                          "layer_normalization_3d_axis_negative_1_epsilon "
                          "layer_normalization_3d_axis_negative_1_epsilon_expanded "
                          "layer_normalization_3d_axis_negative_1_epsilon_expanded_ver18 "
                          "layer_normalization_3d_axis_negative_2_epsilon "
                          "layer_normalization_3d_axis_negative_2_epsilon_expanded "
                          "layer_normalization_3d_axis_negative_2_epsilon_expanded_ver18 "
                          "layer_normalization_3d_axis_negative_3_epsilon "
                          "layer_normalization_3d_axis_negative_3_epsilon_expanded "
                          "layer_normalization_3d_axis_negative_3_epsilon_expanded_ver18 "
                          "layer_normalization_4d_axis0 layer_normalization_4d_axis0_expanded "
                          "layer_normalization_4d_axis0_expanded_ver18 "
                          "layer_normalization_4d_axis1 layer_normalization_4d_axis1_expanded "
                          "layer_normalization_4d_axis1_expanded_ver18 "
                          "layer_normalization_4d_axis2 layer_normalization_4d_axis2_expanded "
                          "layer_normalization_4d_axis2_expanded_ver18 "
                          "layer_normalization_4d_axis3 layer_normalization_4d_axis3_expanded "
                          "layer_normalization_4d_axis3_expanded_ver18 "
                          "layer_normalization_4d_axis_negative_1 "
                          "layer_normalization_4d_axis_negative_1_expanded "
                          "layer_normalization_4d_axis_negative_1_expanded_ver18 "
                          "layer_normalization_4d_axis_negative_2 "
                          "layer_normalization_4d_axis_negative_2_expanded "
                          "layer_normalization_4d_axis_negative_2_expanded_ver18 "
                          "layer_normalization_4d_axis_negative_3 "
                          "layer_normalization_4d_axis_negative_3_expanded "
                          "layer_normalization_4d_axis_negative_3_expanded_ver18 "
                          "layer_normalization_4d_axis_negative_4 "
                          "layer_normalization_4d_axis_negative_4_expanded "
                          "layer_normalization_4d_axis_negative_4_expanded_ver18 "
                          "layer_normalization_default_axis "
                          "layer_normalization_default_axis_expanded "
                          "layer_normalization_default_axis_expanded_ver18",
    "LeakyRelu": "leakyrelu leakyrelu_default leakyrelu_default_expanded leakyrelu_example "
                 "leakyrelu_example_expanded leakyrelu_expanded",
    "Less": "less less_bcast less_int16 less_int8 less_uint16 less_uint32 less_uint64 less_uint8",
    "Log": "log log_example",
    "LogSoftmax": "logsoftmax_axis_0 logsoftmax_axis_0_expanded logsoftmax_axis_0_expanded_ver18 "
                  "logsoftmax_axis_1 logsoftmax_axis_1_expanded logsoftmax_axis_1_expanded_ver18 "
                  "logsoftmax_axis_2 logsoftmax_axis_2_expanded logsoftmax_axis_2_expanded_ver18 "
                  "logsoftmax_default_axis logsoftmax_default_axis_expanded "
                  "logsoftmax_default_axis_expanded_ver18 logsoftmax_example_1 "
                  "logsoftmax_example_1_expanded logsoftmax_example_1_expanded_ver18 "
                  "logsoftmax_large_number logsoftmax_large_number_expanded "
                  "logsoftmax_large_number_expanded_ver18 logsoftmax_negative_axis "
                  "logsoftmax_negative_axis_expanded logsoftmax_negative_axis_expanded_ver18",
    "MatMul": "matmul_1d_1d matmul_1d_3d matmul_2d matmul_3d matmul_4d matmul_4d_1d matmul_bcast",
    "Max": "max_example max_float32 max_int32 max_int64 max_int8 max_two_inputs",
    "MaxPool": "maxpool_2d_ceil maxpool_2d_ceil_output_size_reduce_by_one maxpool_2d_default "
               "maxpool_2d_pads maxpool_2d_precomputed_pads maxpool_2d_precomputed_same_upper "
               "maxpool_2d_precomputed_strides maxpool_2d_same_lower maxpool_2d_same_upper "
               "maxpool_2d_strides",
    "Min": "min_example min_float32 min_int32 min_int64 min_int8 min_two_inputs",
    "Mul": "mul mul_bcast mul_example mul_int8",
    "Neg": "neg neg_example",
    "PRelu": "prelu_broadcast prelu_broadcast_expanded prelu_example prelu_example_expanded",
    "Pad": "constant_pad constant_pad_axes constant_pad_negative_axes edge_pad reflect_pad",
    "Pow": "pow pow_bcast_array pow_bcast_scalar pow_example pow_types_float32_int32 "
           "pow_types_float32_int64 pow_types_int32_float32 pow_types_int32_int32 "
           "pow_types_int64_float32 pow_types_int64_int64",
    "Range": "range_float_type_positive_delta range_int32_type_negative_delta",
    "Reciprocal": "reciprocal reciprocal_example",
    "ReduceMax": "reduce_max_bool_inputs reduce_max_default_axes_keepdim_example "
                 "reduce_max_default_axes_keepdims_random reduce_max_do_not_keepdims_example "
                 "reduce_max_do_not_keepdims_random reduce_max_keepdims_example "
                 "reduce_max_keepdims_random reduce_max_negative_axes_keepdims_example "
                 "reduce_max_negative_axes_keepdims_random",
    "ReduceMean": "reduce_mean_default_axes_keepdims_example "
                  "reduce_mean_default_axes_keepdims_random reduce_mean_do_not_keepdims_example "
                  "reduce_mean_do_not_keepdims_random reduce_mean_keepdims_example "
                  "reduce_mean_keepdims_random reduce_mean_negative_axes_keepdims_example "
                  "reduce_mean_negative_axes_keepdims_random",
    "ReduceSum": "reduce_sum_empty_set reduce_sum_empty_set_non_reduced_axis_zero "
                 "reduce_sum_default_axes_keepdims_example reduce_sum_default_axes_keepdims_random "
                 "reduce_sum_do_not_keepdims_example reduce_sum_do_not_keepdims_random "
                 "reduce_sum_keepdims_example reduce_sum_keepdims_random "
                 "reduce_sum_negative_axes_keepdims_example "
                 "reduce_sum_negative_axes_keepdims_random",
    "Relu": "relu relu_expanded_ver18",
    "Reshape": "reshape_extended_dims reshape_negative_dim reshape_negative_extended_dims "
               "reshape_one_dim reshape_reduced_dims reshape_reordered_all_dims "
               "reshape_reordered_last_dims reshape_zero_and_negative_dim reshape_zero_dim",
    "Resize": "resize_downsample_scales_cubic "
              "resize_downsample_scales_cubic_A_n0p5_exclude_outside "
              "resize_downsample_scales_cubic_align_corners "
              "resize_downsample_scales_cubic_antialias resize_downsample_scales_linear "
              "resize_downsample_scales_linear_align_corners "
              "resize_downsample_scales_linear_antialias "
              "resize_downsample_scales_linear_half_pixel_symmetric "
              "resize_downsample_scales_nearest resize_downsample_sizes_cubic "
              "resize_downsample_sizes_cubic_antialias resize_downsample_sizes_linear_antialias "
              "resize_downsample_sizes_linear_pytorch_half_pixel resize_downsample_sizes_nearest "
              "resize_downsample_sizes_nearest_not_larger "
              "resize_downsample_sizes_nearest_not_smaller resize_tf_crop_and_resize "
              "resize_tf_crop_and_resize_axes_2_3 resize_tf_crop_and_resize_axes_3_2 "
              "resize_tf_crop_and_resize_extrapolation_value resize_upsample_scales_cubic "
              "resize_upsample_scales_cubic_A_n0p5_exclude_outside "
              "resize_upsample_scales_cubic_align_corners resize_upsample_scales_cubic_asymmetric "
              "resize_upsample_scales_linear resize_upsample_scales_linear_align_corners "
              "resize_upsample_scales_linear_half_pixel_symmetric resize_upsample_scales_nearest "
              "resize_upsample_scales_nearest_axes_2_3 resize_upsample_scales_nearest_axes_3_2 "
              "resize_upsample_sizes_cubic resize_upsample_sizes_nearest "
              "resize_upsample_sizes_nearest_axes_2_3 resize_upsample_sizes_nearest_axes_3_2 "
              "resize_upsample_sizes_nearest_ceil_half_pixel "
              "resize_upsample_sizes_nearest_floor_align_corners "
              "resize_upsample_sizes_nearest_not_larger resize_upsample_sizes_nearest_not_smaller "
              "resize_upsample_sizes_nearest_round_prefer_ceil_asymmetric",
    "Shape": "shape shape_clip_end shape_clip_start shape_end_1 shape_end_negative_1 shape_example "
             "shape_start_1 shape_start_1_end_2 shape_start_1_end_negative_1 "
             "shape_start_greater_than_end shape_start_negative_1",
    "Sigmoid": "sigmoid sigmoid_example",
    "Slice": "slice slice_default_axes slice_default_steps slice_end_out_of_bounds slice_neg "
             "slice_neg_steps slice_negative_axes",
    "Softmax": "softmax_axis_0 softmax_axis_0_expanded softmax_axis_0_expanded_ver18 "
               "softmax_axis_1 softmax_axis_1_expanded softmax_axis_1_expanded_ver18 "
               "softmax_axis_2 softmax_axis_2_expanded softmax_axis_2_expanded_ver18 "
               "softmax_default_axis softmax_default_axis_expanded "
               "softmax_default_axis_expanded_ver18 softmax_example softmax_example_expanded "
               "softmax_example_expanded_ver18 softmax_large_number softmax_large_number_expanded "
               "softmax_large_number_expanded_ver18 softmax_negative_axis "
               "softmax_negative_axis_expanded softmax_negative_axis_expanded_ver18",
    "Softplus": "softplus softplus_example softplus_example_expanded_ver18 softplus_expanded_ver18",
    "SpaceToDepth": "spacetodepth spacetodepth_crd_mode_example "
                    "spacetodepth_crd_mode_example_expanded spacetodepth_dcr_mode_example "
                    "spacetodepth_dcr_mode_example_expanded spacetodepth_example "
                    "spacetodepth_example_expanded spacetodepth_expanded",
    "Split": "split_zero_size_splits_opset13 split_zero_size_splits_opset18 "
             "split_1d_uneven_split_opset18 split_2d_uneven_split_opset18 "
             "split_equal_parts_1d_opset13 split_equal_parts_1d_opset18 split_equal_parts_2d "
             "split_equal_parts_2d_opset13 split_equal_parts_default_axis_opset13 "
             "split_equal_parts_default_axis_opset18 split_variable_parts_1d_opset13 "
             "split_variable_parts_1d_opset18 split_variable_parts_2d_opset13 "
             "split_variable_parts_2d_opset18 split_variable_parts_default_axis_opset13 "
             "split_variable_parts_default_axis_opset18",
    "Sqrt": "sqrt sqrt_example",
    "Squeeze": "squeeze squeeze_negative_axes",
    "Sub": "sub sub_bcast sub_example sub_int8",
    "Tanh": "tanh tanh_example",
    "Tile": "tile tile_precomputed",
    "Transpose": "transpose_all_permutations_0 transpose_all_permutations_1 "
                 "transpose_all_permutations_2 transpose_all_permutations_3 "
                 "transpose_all_permutations_4 transpose_all_permutations_5 transpose_default",
    "Unsqueeze": "unsqueeze_axis_0 unsqueeze_axis_1 unsqueeze_axis_2 unsqueeze_negative_axes "
                 "unsqueeze_three_axes unsqueeze_two_axes unsqueeze_unsorted_axes",
    "Upsample": "upsample_nearest",
    "Where": "where_example where_long_example",
}

#: node tests of supported operators that still crash inside numpy instead of a typed error.
KNOWN_CRASHES: dict = {}

#: node tests that pass since 1-D windows, If, the integer/float16 element types and (s17_conf)
#: pool dilations and further attribute forms landed (kept apart from PASSING so parallel
#: edits merge)
PASSING_FORMS = {
    "Add": "add_int16 add_uint16 add_uint32 add_uint64 add_uint8",
    "ArgMax": "argmax_default_axis_example_select_last_index "
              "argmax_default_axis_random_select_last_index "
              "argmax_keepdims_example_select_last_index argmax_keepdims_random_select_last_index "
              "argmax_negative_axis_keepdims_example_select_last_index "
              "argmax_negative_axis_keepdims_random_select_last_index "
              "argmax_no_keepdims_example_select_last_index "
              "argmax_no_keepdims_random_select_last_index",
    "AveragePool": "averagepool_1d_default averagepool_3d_default averagepool_2d_dilations "
                   "averagepool_3d_dilations_large_count_include_pad_is_0_ceil_mode_is_False "
                   "averagepool_3d_dilations_large_count_include_pad_is_0_ceil_mode_is_True "
                   "averagepool_3d_dilations_large_count_include_pad_is_1_ceil_mode_is_False "
                   "averagepool_3d_dilations_large_count_include_pad_is_1_ceil_mode_is_True "
                   "averagepool_3d_dilations_small",
    "Cast": "cast_UINT2_to_UINT8 cast_UINT4_to_UINT8 castlike_BFLOAT16_to_FLOAT_expanded "
            "castlike_DOUBLE_to_FLOAT_expanded castlike_FLOAT16_to_FLOAT_expanded "
            "castlike_FLOAT4E2M1_to_FLOAT_expanded castlike_FLOAT8E4M3FNUZ_to_FLOAT_expanded "
            "castlike_FLOAT8E4M3FN_to_FLOAT_expanded castlike_FLOAT8E5M2FNUZ_to_FLOAT_expanded "
            "castlike_FLOAT8E5M2_to_FLOAT_expanded castlike_INT2_to_FLOAT_expanded "
            "castlike_INT2_to_INT8_expanded castlike_INT4_to_FLOAT_expanded "
            "castlike_INT4_to_INT8_expanded castlike_UINT2_to_FLOAT_expanded "
            "castlike_UINT2_to_UINT8_expanded castlike_UINT4_to_FLOAT_expanded "
            "castlike_UINT4_to_UINT8_expanded cast_DOUBLE_to_FLOAT16 cast_FLOAT16_to_DOUBLE "
            "cast_FLOAT4E2M1_to_FLOAT16 cast_FLOAT8E4M3FNUZ_to_FLOAT16 "
            "cast_FLOAT8E4M3FN_to_FLOAT16 cast_FLOAT8E5M2FNUZ_to_FLOAT16 "
            "cast_FLOAT8E5M2_to_FLOAT16 cast_FLOAT_to_DOUBLE cast_FLOAT_to_FLOAT16 "
            "cast_INT2_to_FLOAT16 cast_INT4_to_FLOAT16 cast_UINT2_to_FLOAT16 "
            "cast_UINT4_to_FLOAT16 cast_e8m0_FLOAT8E8M0_to_FLOAT16 "
            "castlike_DOUBLE_to_FLOAT16_expanded castlike_FLOAT16_to_DOUBLE_expanded "
            "castlike_FLOAT4E2M1_to_FLOAT16_expanded castlike_FLOAT8E4M3FNUZ_to_FLOAT16_expanded "
            "castlike_FLOAT8E4M3FN_to_FLOAT16_expanded "
            "castlike_FLOAT8E5M2FNUZ_to_FLOAT16_expanded castlike_FLOAT8E5M2_to_FLOAT16_expanded "
            "castlike_FLOAT_to_DOUBLE_expanded castlike_FLOAT_to_FLOAT16_expanded "
            "castlike_INT2_to_FLOAT16_expanded castlike_INT4_to_FLOAT16_expanded "
            "castlike_UINT2_to_FLOAT16_expanded castlike_UINT4_to_FLOAT16_expanded",
    "CastLike": "castlike_BFLOAT16_to_FLOAT castlike_DOUBLE_to_FLOAT castlike_DOUBLE_to_FLOAT16 "
               "castlike_FLOAT16_to_DOUBLE castlike_FLOAT16_to_FLOAT "
               "castlike_FLOAT16_to_FLOAT4E2M1 castlike_FLOAT16_to_FLOAT8E4M3FN "
               "castlike_FLOAT16_to_FLOAT8E4M3FNUZ castlike_FLOAT16_to_FLOAT8E5M2 "
               "castlike_FLOAT16_to_FLOAT8E5M2FNUZ castlike_FLOAT16_to_INT2 "
               "castlike_FLOAT16_to_INT4 castlike_FLOAT16_to_UINT2 castlike_FLOAT16_to_UINT4 "
               "castlike_FLOAT4E2M1_to_FLOAT castlike_FLOAT4E2M1_to_FLOAT16 "
               "castlike_FLOAT8E4M3FNUZ_to_FLOAT castlike_FLOAT8E4M3FNUZ_to_FLOAT16 "
               "castlike_FLOAT8E4M3FN_to_FLOAT castlike_FLOAT8E4M3FN_to_FLOAT16 "
               "castlike_FLOAT8E5M2FNUZ_to_FLOAT castlike_FLOAT8E5M2FNUZ_to_FLOAT16 "
               "castlike_FLOAT8E5M2_to_FLOAT castlike_FLOAT8E5M2_to_FLOAT16 "
               "castlike_FLOAT_to_BFLOAT16 castlike_FLOAT_to_DOUBLE castlike_FLOAT_to_FLOAT16 "
               "castlike_FLOAT_to_FLOAT4E2M1 castlike_FLOAT_to_FLOAT8E4M3FN "
               "castlike_FLOAT_to_FLOAT8E4M3FNUZ castlike_FLOAT_to_FLOAT8E5M2 "
               "castlike_FLOAT_to_FLOAT8E5M2FNUZ castlike_FLOAT_to_INT2 castlike_FLOAT_to_INT4 "
               "castlike_FLOAT_to_UINT2 castlike_FLOAT_to_UINT4 castlike_INT2_to_FLOAT "
               "castlike_INT2_to_FLOAT16 castlike_INT2_to_INT8 castlike_INT4_to_FLOAT "
               "castlike_INT4_to_FLOAT16 castlike_INT4_to_INT8 castlike_UINT2_to_FLOAT "
               "castlike_UINT2_to_FLOAT16 castlike_UINT2_to_UINT8 castlike_UINT4_to_FLOAT "
               "castlike_UINT4_to_FLOAT16 castlike_UINT4_to_UINT8 "
               "castlike_no_saturate_FLOAT16_to_FLOAT8E4M3FN "
               "castlike_no_saturate_FLOAT16_to_FLOAT8E4M3FNUZ "
               "castlike_no_saturate_FLOAT16_to_FLOAT8E5M2 "
               "castlike_no_saturate_FLOAT16_to_FLOAT8E5M2FNUZ "
               "castlike_no_saturate_FLOAT_to_FLOAT8E4M3FN "
               "castlike_no_saturate_FLOAT_to_FLOAT8E4M3FNUZ "
               "castlike_no_saturate_FLOAT_to_FLOAT8E5M2 "
               "castlike_no_saturate_FLOAT_to_FLOAT8E5M2FNUZ",
    "ConvTranspose": "convtranspose_1d convtranspose_3d",
    "DequantizeLinear": "dequantizelinear_e4m3fn_float16 dequantizelinear_blocked",
    "Div": "div_int16 div_uint16 div_uint32 div_uint64 div_uint8",
    "Dropout": "dropout_default dropout_default_mask dropout_default_mask_ratio "
               "dropout_default_old dropout_default_ratio dropout_random_old",
    "Einsum": "einsum_batch_diagonal einsum_batch_matmul einsum_inner_prod einsum_scalar "
              "einsum_sum einsum_transpose",
    "If": "if if_opt if_seq",
    "Max": "max_int16 max_one_input max_uint16 max_uint32 max_uint64 max_uint8 max_float16 "
           "max_float64",
    "MaxPool": "maxpool_1d_default maxpool_2d_uint8 maxpool_3d_default maxpool_2d_dilations "
               "maxpool_3d_dilations maxpool_3d_dilations_use_ref_impl "
               "maxpool_3d_dilations_use_ref_impl_large maxpool_with_argmax_2d_precomputed_pads "
               "maxpool_with_argmax_2d_precomputed_strides",
    "Min": "min_int16 min_one_input min_uint16 min_uint32 min_uint64 min_uint8 min_float16 "
           "min_float64",
    "Mul": "mul_int16 mul_uint16 mul_uint32 mul_uint64 mul_uint8",
    "Pow": "pow_types_float32_uint32 pow_types_float32_uint64",
    "QuantizeLinear": "quantizelinear quantizelinear_axis quantizelinear_e4m3fn "
                      "quantizelinear_e5m2 quantizelinear_float4e2m1 quantizelinear_int16 "
                      "quantizelinear_int2 quantizelinear_int4 quantizelinear_uint16 "
                      "quantizelinear_uint2 quantizelinear_uint4 "
                      "quantizelinear_blocked_asymmetric quantizelinear_blocked_symmetric",
    "Range": "range_float16_type_positive_delta",
    "ReduceSum": "reduce_sum_empty_axes_input_noop reduce_sum_empty_axes_input_noop_example",
    "Sub": "sub_int16 sub_uint16 sub_uint32 sub_uint64 sub_uint8",
    "Pad": "wrap_pad",
}
#: node tests that pass since the narrow element types (bfloat16, float8, float4, int4, int2,
#: float8e8m0) landed (s18_conf; PASSING_FORMS' CastLike also lists the CastLike cases that
#: passed before, unchecked until CastLike had an entry)
PASSING_NARROW = {
    "Cast": "cast_FLOAT16_to_FLOAT4E2M1 cast_FLOAT16_to_FLOAT8E4M3FN "
           "cast_FLOAT16_to_FLOAT8E4M3FNUZ cast_FLOAT16_to_FLOAT8E5M2 "
           "cast_FLOAT16_to_FLOAT8E5M2FNUZ cast_FLOAT16_to_INT2 cast_FLOAT16_to_INT4 "
           "cast_FLOAT16_to_UINT2 cast_FLOAT16_to_UINT4 cast_FLOAT_to_BFLOAT16 "
           "cast_FLOAT_to_FLOAT4E2M1 cast_FLOAT_to_FLOAT8E4M3FN cast_FLOAT_to_FLOAT8E4M3FNUZ "
           "cast_FLOAT_to_FLOAT8E5M2 cast_FLOAT_to_FLOAT8E5M2FNUZ cast_FLOAT_to_INT2 "
           "cast_FLOAT_to_INT4 cast_FLOAT_to_UINT2 cast_FLOAT_to_UINT4 "
           "cast_e8m0_FLOAT16_to_FLOAT8E8M0 cast_e8m0_FLOAT_to_FLOAT8E8M0 "
           "cast_no_saturate_FLOAT16_to_FLOAT8E4M3FN "
           "cast_no_saturate_FLOAT16_to_FLOAT8E4M3FNUZ cast_no_saturate_FLOAT16_to_FLOAT8E5M2 "
           "cast_no_saturate_FLOAT16_to_FLOAT8E5M2FNUZ cast_no_saturate_FLOAT_to_FLOAT8E4M3FN "
           "cast_no_saturate_FLOAT_to_FLOAT8E4M3FNUZ cast_no_saturate_FLOAT_to_FLOAT8E5M2 "
           "cast_no_saturate_FLOAT_to_FLOAT8E5M2FNUZ castlike_FLOAT16_to_FLOAT4E2M1_expanded "
           "castlike_FLOAT16_to_FLOAT8E4M3FNUZ_expanded "
           "castlike_FLOAT16_to_FLOAT8E4M3FN_expanded "
           "castlike_FLOAT16_to_FLOAT8E5M2FNUZ_expanded "
           "castlike_FLOAT16_to_FLOAT8E5M2_expanded castlike_FLOAT16_to_INT2_expanded "
           "castlike_FLOAT16_to_INT4_expanded castlike_FLOAT16_to_UINT2_expanded "
           "castlike_FLOAT16_to_UINT4_expanded castlike_FLOAT_to_BFLOAT16_expanded "
           "castlike_FLOAT_to_FLOAT4E2M1_expanded castlike_FLOAT_to_FLOAT8E4M3FNUZ_expanded "
           "castlike_FLOAT_to_FLOAT8E4M3FN_expanded castlike_FLOAT_to_FLOAT8E5M2FNUZ_expanded "
           "castlike_FLOAT_to_FLOAT8E5M2_expanded castlike_FLOAT_to_INT2_expanded "
           "castlike_FLOAT_to_INT4_expanded castlike_FLOAT_to_UINT2_expanded "
           "castlike_FLOAT_to_UINT4_expanded "
           "castlike_no_saturate_FLOAT16_to_FLOAT8E4M3FNUZ_expanded "
           "castlike_no_saturate_FLOAT16_to_FLOAT8E4M3FN_expanded "
           "castlike_no_saturate_FLOAT16_to_FLOAT8E5M2FNUZ_expanded "
           "castlike_no_saturate_FLOAT16_to_FLOAT8E5M2_expanded "
           "castlike_no_saturate_FLOAT_to_FLOAT8E4M3FNUZ_expanded "
           "castlike_no_saturate_FLOAT_to_FLOAT8E4M3FN_expanded "
           "castlike_no_saturate_FLOAT_to_FLOAT8E5M2FNUZ_expanded "
           "castlike_no_saturate_FLOAT_to_FLOAT8E5M2_expanded",
}
#: node tests that pass since s19_conf: empty tensors (a value with a zero-size dimension is a
#: constant; ReduceMax over an empty set is -inf / False; Reshape ``allowzero``), bfloat16
#: arithmetic (bfloat16 constants carried in float32), BatchNormalization and Dropout
#: training_mode (Dropout's mask as onnx.reference draws it from the node's seed), Loop with a
#: trip count that folds (Range's ``_expanded`` function bodies)
PASSING_S19 = {
    "Range": "range_bfloat16_type_positive_delta range_bfloat16_type_positive_delta_expanded "
             "range_float16_type_positive_delta_expanded range_float_type_positive_delta_expanded "
             "range_int32_type_negative_delta_expanded",
    "Dropout": "training_dropout training_dropout_default training_dropout_default_mask "
               "training_dropout_mask training_dropout_zero_ratio training_dropout_zero_ratio_mask",
    "BatchNormalization": "batchnorm_epsilon_training_mode batchnorm_example_training_mode",
    "Einsum": "einsum_batch_matmul_bfloat16 einsum_sum_bfloat16 einsum_transpose_bfloat16",
    "ReduceMax": "reduce_max_empty_set reduce_max_empty_set_bool",
    "Reshape": "reshape_allowzero_reordered",
    "Slice": "slice_start_out_of_bounds",
}
for _op, _names in PASSING_S19.items():
    PASSING_FORMS[_op] = (PASSING_FORMS.get(_op, "") + " " + _names).strip()
for _op, _names in PASSING_NARROW.items():
    PASSING_FORMS[_op] = (PASSING_FORMS.get(_op, "") + " " + _names).strip()
for _op, _names in PASSING_FORMS.items():
    PASSING[_op] = (PASSING.get(_op, "") + " " + _names).strip()
