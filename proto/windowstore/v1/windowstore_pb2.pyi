from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ColumnType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    COLUMN_TYPE_UNSPECIFIED: _ClassVar[ColumnType]
    COLUMN_TYPE_INT64: _ClassVar[ColumnType]
    COLUMN_TYPE_FLOAT64: _ClassVar[ColumnType]
    COLUMN_TYPE_STRING: _ClassVar[ColumnType]
    COLUMN_TYPE_INT128: _ClassVar[ColumnType]
    COLUMN_TYPE_BOOLEAN: _ClassVar[ColumnType]
    COLUMN_TYPE_TIMESTAMP: _ClassVar[ColumnType]
    COLUMN_TYPE_DATE: _ClassVar[ColumnType]
    COLUMN_TYPE_DECIMAL: _ClassVar[ColumnType]

class Clock(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CLOCK_UNSPECIFIED: _ClassVar[Clock]
    CLOCK_PROCESSING: _ClassVar[Clock]
    CLOCK_EVENT: _ClassVar[Clock]
    CLOCK_MANUAL: _ClassVar[Clock]

class AccessPath(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ACCESS_PATH_UNSPECIFIED: _ClassVar[AccessPath]
    ACCESS_PATH_PROBE: _ClassVar[AccessPath]
    ACCESS_PATH_SYNOPSIS: _ClassVar[AccessPath]
    ACCESS_PATH_WINDOW: _ClassVar[AccessPath]
    ACCESS_PATH_JOIN: _ClassVar[AccessPath]

class AggregateFunction(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    AGGREGATE_FUNCTION_UNSPECIFIED: _ClassVar[AggregateFunction]
    AGGREGATE_FUNCTION_COUNT: _ClassVar[AggregateFunction]
    AGGREGATE_FUNCTION_SUM: _ClassVar[AggregateFunction]
    AGGREGATE_FUNCTION_AVG: _ClassVar[AggregateFunction]
    AGGREGATE_FUNCTION_MIN: _ClassVar[AggregateFunction]
    AGGREGATE_FUNCTION_MAX: _ClassVar[AggregateFunction]
    AGGREGATE_FUNCTION_COUNT_DISTINCT: _ClassVar[AggregateFunction]
    AGGREGATE_FUNCTION_QUANTILE: _ClassVar[AggregateFunction]

class LengthUnit(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LENGTH_UNIT_UNSPECIFIED: _ClassVar[LengthUnit]
    LENGTH_UNIT_MS: _ClassVar[LengthUnit]
    LENGTH_UNIT_SUBWINDOWS: _ClassVar[LengthUnit]
    LENGTH_UNIT_ROWS: _ClassVar[LengthUnit]

class NullOrder(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NULL_ORDER_UNSPECIFIED: _ClassVar[NullOrder]
    NULL_ORDER_FIRST: _ClassVar[NullOrder]
    NULL_ORDER_LAST: _ClassVar[NullOrder]

class ReplicaRole(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    REPLICA_ROLE_UNSPECIFIED: _ClassVar[ReplicaRole]
    REPLICA_ROLE_LEADER: _ClassVar[ReplicaRole]
    REPLICA_ROLE_FOLLOWER: _ClassVar[ReplicaRole]
COLUMN_TYPE_UNSPECIFIED: ColumnType
COLUMN_TYPE_INT64: ColumnType
COLUMN_TYPE_FLOAT64: ColumnType
COLUMN_TYPE_STRING: ColumnType
COLUMN_TYPE_INT128: ColumnType
COLUMN_TYPE_BOOLEAN: ColumnType
COLUMN_TYPE_TIMESTAMP: ColumnType
COLUMN_TYPE_DATE: ColumnType
COLUMN_TYPE_DECIMAL: ColumnType
CLOCK_UNSPECIFIED: Clock
CLOCK_PROCESSING: Clock
CLOCK_EVENT: Clock
CLOCK_MANUAL: Clock
ACCESS_PATH_UNSPECIFIED: AccessPath
ACCESS_PATH_PROBE: AccessPath
ACCESS_PATH_SYNOPSIS: AccessPath
ACCESS_PATH_WINDOW: AccessPath
ACCESS_PATH_JOIN: AccessPath
AGGREGATE_FUNCTION_UNSPECIFIED: AggregateFunction
AGGREGATE_FUNCTION_COUNT: AggregateFunction
AGGREGATE_FUNCTION_SUM: AggregateFunction
AGGREGATE_FUNCTION_AVG: AggregateFunction
AGGREGATE_FUNCTION_MIN: AggregateFunction
AGGREGATE_FUNCTION_MAX: AggregateFunction
AGGREGATE_FUNCTION_COUNT_DISTINCT: AggregateFunction
AGGREGATE_FUNCTION_QUANTILE: AggregateFunction
LENGTH_UNIT_UNSPECIFIED: LengthUnit
LENGTH_UNIT_MS: LengthUnit
LENGTH_UNIT_SUBWINDOWS: LengthUnit
LENGTH_UNIT_ROWS: LengthUnit
NULL_ORDER_UNSPECIFIED: NullOrder
NULL_ORDER_FIRST: NullOrder
NULL_ORDER_LAST: NullOrder
REPLICA_ROLE_UNSPECIFIED: ReplicaRole
REPLICA_ROLE_LEADER: ReplicaRole
REPLICA_ROLE_FOLLOWER: ReplicaRole

class Column(_message.Message):
    __slots__ = ("name", "type", "precision", "scale")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    PRECISION_FIELD_NUMBER: _ClassVar[int]
    SCALE_FIELD_NUMBER: _ClassVar[int]
    name: str
    type: ColumnType
    precision: int
    scale: int
    def __init__(self, name: _Optional[str] = ..., type: _Optional[_Union[ColumnType, str]] = ..., precision: _Optional[int] = ..., scale: _Optional[int] = ...) -> None: ...

class StreamSpec(_message.Message):
    __slots__ = ("name", "columns", "time_column", "subwindows", "subwindow_ms", "subwindow_rows", "clock", "allowed_lateness_ms", "group_by", "topk", "partition", "origin_ms", "last_rows", "last_rows_by", "last_rows_keys", "sketches")
    NAME_FIELD_NUMBER: _ClassVar[int]
    COLUMNS_FIELD_NUMBER: _ClassVar[int]
    TIME_COLUMN_FIELD_NUMBER: _ClassVar[int]
    SUBWINDOWS_FIELD_NUMBER: _ClassVar[int]
    SUBWINDOW_MS_FIELD_NUMBER: _ClassVar[int]
    SUBWINDOW_ROWS_FIELD_NUMBER: _ClassVar[int]
    CLOCK_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_LATENESS_MS_FIELD_NUMBER: _ClassVar[int]
    GROUP_BY_FIELD_NUMBER: _ClassVar[int]
    TOPK_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_MS_FIELD_NUMBER: _ClassVar[int]
    LAST_ROWS_FIELD_NUMBER: _ClassVar[int]
    LAST_ROWS_BY_FIELD_NUMBER: _ClassVar[int]
    LAST_ROWS_KEYS_FIELD_NUMBER: _ClassVar[int]
    SKETCHES_FIELD_NUMBER: _ClassVar[int]
    name: str
    columns: _containers.RepeatedCompositeFieldContainer[Column]
    time_column: str
    subwindows: int
    subwindow_ms: int
    subwindow_rows: int
    clock: Clock
    allowed_lateness_ms: int
    group_by: _containers.RepeatedScalarFieldContainer[str]
    topk: int
    partition: PartitionSpec
    origin_ms: int
    last_rows: int
    last_rows_by: _containers.RepeatedScalarFieldContainer[str]
    last_rows_keys: int
    sketches: _containers.RepeatedCompositeFieldContainer[SketchSpec]
    def __init__(self, name: _Optional[str] = ..., columns: _Optional[_Iterable[_Union[Column, _Mapping]]] = ..., time_column: _Optional[str] = ..., subwindows: _Optional[int] = ..., subwindow_ms: _Optional[int] = ..., subwindow_rows: _Optional[int] = ..., clock: _Optional[_Union[Clock, str]] = ..., allowed_lateness_ms: _Optional[int] = ..., group_by: _Optional[_Iterable[str]] = ..., topk: _Optional[int] = ..., partition: _Optional[_Union[PartitionSpec, _Mapping]] = ..., origin_ms: _Optional[int] = ..., last_rows: _Optional[int] = ..., last_rows_by: _Optional[_Iterable[str]] = ..., last_rows_keys: _Optional[int] = ..., sketches: _Optional[_Iterable[_Union[SketchSpec, _Mapping]]] = ...) -> None: ...

class SketchSpec(_message.Message):
    __slots__ = ("column", "kind", "size")
    COLUMN_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    column: str
    kind: str
    size: int
    def __init__(self, column: _Optional[str] = ..., kind: _Optional[str] = ..., size: _Optional[int] = ...) -> None: ...

class PartitionSpec(_message.Message):
    __slots__ = ("stream", "index", "count", "key")
    STREAM_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    stream: str
    index: int
    count: int
    key: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, stream: _Optional[str] = ..., index: _Optional[int] = ..., count: _Optional[int] = ..., key: _Optional[_Iterable[str]] = ...) -> None: ...

class StreamInfo(_message.Message):
    __slots__ = ("spec", "latest_slide", "buffered_rows", "window_rows", "created_ms", "window_start_ms", "window_end_ms", "next_slide_ms", "stopped")
    SPEC_FIELD_NUMBER: _ClassVar[int]
    LATEST_SLIDE_FIELD_NUMBER: _ClassVar[int]
    BUFFERED_ROWS_FIELD_NUMBER: _ClassVar[int]
    WINDOW_ROWS_FIELD_NUMBER: _ClassVar[int]
    CREATED_MS_FIELD_NUMBER: _ClassVar[int]
    WINDOW_START_MS_FIELD_NUMBER: _ClassVar[int]
    WINDOW_END_MS_FIELD_NUMBER: _ClassVar[int]
    NEXT_SLIDE_MS_FIELD_NUMBER: _ClassVar[int]
    STOPPED_FIELD_NUMBER: _ClassVar[int]
    spec: StreamSpec
    latest_slide: int
    buffered_rows: int
    window_rows: int
    created_ms: int
    window_start_ms: int
    window_end_ms: int
    next_slide_ms: int
    stopped: str
    def __init__(self, spec: _Optional[_Union[StreamSpec, _Mapping]] = ..., latest_slide: _Optional[int] = ..., buffered_rows: _Optional[int] = ..., window_rows: _Optional[int] = ..., created_ms: _Optional[int] = ..., window_start_ms: _Optional[int] = ..., window_end_ms: _Optional[int] = ..., next_slide_ms: _Optional[int] = ..., stopped: _Optional[str] = ...) -> None: ...

class CreateStreamRequest(_message.Message):
    __slots__ = ("spec", "replication", "acks")
    SPEC_FIELD_NUMBER: _ClassVar[int]
    REPLICATION_FIELD_NUMBER: _ClassVar[int]
    ACKS_FIELD_NUMBER: _ClassVar[int]
    spec: StreamSpec
    replication: int
    acks: str
    def __init__(self, spec: _Optional[_Union[StreamSpec, _Mapping]] = ..., replication: _Optional[int] = ..., acks: _Optional[str] = ...) -> None: ...

class CreateStreamResponse(_message.Message):
    __slots__ = ("stream",)
    STREAM_FIELD_NUMBER: _ClassVar[int]
    stream: StreamInfo
    def __init__(self, stream: _Optional[_Union[StreamInfo, _Mapping]] = ...) -> None: ...

class DropStreamRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DropStreamResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListStreamsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListStreamsResponse(_message.Message):
    __slots__ = ("streams",)
    STREAMS_FIELD_NUMBER: _ClassVar[int]
    streams: _containers.RepeatedCompositeFieldContainer[StreamInfo]
    def __init__(self, streams: _Optional[_Iterable[_Union[StreamInfo, _Mapping]]] = ...) -> None: ...

class DescribeStreamRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DescribeStreamResponse(_message.Message):
    __slots__ = ("stream",)
    STREAM_FIELD_NUMBER: _ClassVar[int]
    stream: StreamInfo
    def __init__(self, stream: _Optional[_Union[StreamInfo, _Mapping]] = ...) -> None: ...

class Int64Values(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, values: _Optional[_Iterable[int]] = ...) -> None: ...

class Float64Values(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, values: _Optional[_Iterable[float]] = ...) -> None: ...

class StringValues(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, values: _Optional[_Iterable[str]] = ...) -> None: ...

class BoolValues(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedScalarFieldContainer[bool]
    def __init__(self, values: _Optional[_Iterable[bool]] = ...) -> None: ...

class ColumnValues(_message.Message):
    __slots__ = ("name", "int64_values", "float64_values", "string_values", "bool_values", "is_null")
    NAME_FIELD_NUMBER: _ClassVar[int]
    INT64_VALUES_FIELD_NUMBER: _ClassVar[int]
    FLOAT64_VALUES_FIELD_NUMBER: _ClassVar[int]
    STRING_VALUES_FIELD_NUMBER: _ClassVar[int]
    BOOL_VALUES_FIELD_NUMBER: _ClassVar[int]
    IS_NULL_FIELD_NUMBER: _ClassVar[int]
    name: str
    int64_values: Int64Values
    float64_values: Float64Values
    string_values: StringValues
    bool_values: BoolValues
    is_null: _containers.RepeatedScalarFieldContainer[bool]
    def __init__(self, name: _Optional[str] = ..., int64_values: _Optional[_Union[Int64Values, _Mapping]] = ..., float64_values: _Optional[_Union[Float64Values, _Mapping]] = ..., string_values: _Optional[_Union[StringValues, _Mapping]] = ..., bool_values: _Optional[_Union[BoolValues, _Mapping]] = ..., is_null: _Optional[_Iterable[bool]] = ...) -> None: ...

class ColumnarBatch(_message.Message):
    __slots__ = ("columns",)
    COLUMNS_FIELD_NUMBER: _ClassVar[int]
    columns: _containers.RepeatedCompositeFieldContainer[ColumnValues]
    def __init__(self, columns: _Optional[_Iterable[_Union[ColumnValues, _Mapping]]] = ...) -> None: ...

class AppendRequest(_message.Message):
    __slots__ = ("stream", "arrow_ipc", "columnar", "writer_id", "batch_id", "event_time_ms", "after_batch_id")
    STREAM_FIELD_NUMBER: _ClassVar[int]
    ARROW_IPC_FIELD_NUMBER: _ClassVar[int]
    COLUMNAR_FIELD_NUMBER: _ClassVar[int]
    WRITER_ID_FIELD_NUMBER: _ClassVar[int]
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    EVENT_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    AFTER_BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    stream: str
    arrow_ipc: bytes
    columnar: ColumnarBatch
    writer_id: str
    batch_id: int
    event_time_ms: int
    after_batch_id: int
    def __init__(self, stream: _Optional[str] = ..., arrow_ipc: _Optional[bytes] = ..., columnar: _Optional[_Union[ColumnarBatch, _Mapping]] = ..., writer_id: _Optional[str] = ..., batch_id: _Optional[int] = ..., event_time_ms: _Optional[int] = ..., after_batch_id: _Optional[int] = ...) -> None: ...

class AppendResponse(_message.Message):
    __slots__ = ("accepted_rows", "late_rows", "duplicate", "latest_slide")
    ACCEPTED_ROWS_FIELD_NUMBER: _ClassVar[int]
    LATE_ROWS_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    LATEST_SLIDE_FIELD_NUMBER: _ClassVar[int]
    accepted_rows: int
    late_rows: int
    duplicate: bool
    latest_slide: int
    def __init__(self, accepted_rows: _Optional[int] = ..., late_rows: _Optional[int] = ..., duplicate: _Optional[bool] = ..., latest_slide: _Optional[int] = ...) -> None: ...

class SlideRequest(_message.Message):
    __slots__ = ("stream", "writer_id", "batch_id")
    STREAM_FIELD_NUMBER: _ClassVar[int]
    WRITER_ID_FIELD_NUMBER: _ClassVar[int]
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    stream: str
    writer_id: str
    batch_id: int
    def __init__(self, stream: _Optional[str] = ..., writer_id: _Optional[str] = ..., batch_id: _Optional[int] = ...) -> None: ...

class SlideResponse(_message.Message):
    __slots__ = ("slide", "rows", "duplicate")
    SLIDE_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    slide: int
    rows: int
    duplicate: bool
    def __init__(self, slide: _Optional[int] = ..., rows: _Optional[int] = ..., duplicate: _Optional[bool] = ...) -> None: ...

class Int128(_message.Message):
    __slots__ = ("high", "low")
    HIGH_FIELD_NUMBER: _ClassVar[int]
    LOW_FIELD_NUMBER: _ClassVar[int]
    high: int
    low: int
    def __init__(self, high: _Optional[int] = ..., low: _Optional[int] = ...) -> None: ...

class Value(_message.Message):
    __slots__ = ("int64_value", "float64_value", "string_value", "int128_value", "decimal_value", "bool_value", "timestamp_us", "date_days")
    INT64_VALUE_FIELD_NUMBER: _ClassVar[int]
    FLOAT64_VALUE_FIELD_NUMBER: _ClassVar[int]
    STRING_VALUE_FIELD_NUMBER: _ClassVar[int]
    INT128_VALUE_FIELD_NUMBER: _ClassVar[int]
    DECIMAL_VALUE_FIELD_NUMBER: _ClassVar[int]
    BOOL_VALUE_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_US_FIELD_NUMBER: _ClassVar[int]
    DATE_DAYS_FIELD_NUMBER: _ClassVar[int]
    int64_value: int
    float64_value: float
    string_value: str
    int128_value: Int128
    decimal_value: str
    bool_value: bool
    timestamp_us: int
    date_days: int
    def __init__(self, int64_value: _Optional[int] = ..., float64_value: _Optional[float] = ..., string_value: _Optional[str] = ..., int128_value: _Optional[_Union[Int128, _Mapping]] = ..., decimal_value: _Optional[str] = ..., bool_value: _Optional[bool] = ..., timestamp_us: _Optional[int] = ..., date_days: _Optional[int] = ...) -> None: ...

class Row(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedCompositeFieldContainer[Value]
    def __init__(self, values: _Optional[_Iterable[_Union[Value, _Mapping]]] = ...) -> None: ...

class WindowLength(_message.Message):
    __slots__ = ("value", "unit")
    VALUE_FIELD_NUMBER: _ClassVar[int]
    UNIT_FIELD_NUMBER: _ClassVar[int]
    value: int
    unit: LengthUnit
    def __init__(self, value: _Optional[int] = ..., unit: _Optional[_Union[LengthUnit, str]] = ...) -> None: ...

class Aggregate(_message.Message):
    __slots__ = ("func", "column", "q", "alias", "function_name")
    FUNC_FIELD_NUMBER: _ClassVar[int]
    COLUMN_FIELD_NUMBER: _ClassVar[int]
    Q_FIELD_NUMBER: _ClassVar[int]
    ALIAS_FIELD_NUMBER: _ClassVar[int]
    FUNCTION_NAME_FIELD_NUMBER: _ClassVar[int]
    func: AggregateFunction
    column: str
    q: float
    alias: str
    function_name: str
    def __init__(self, func: _Optional[_Union[AggregateFunction, str]] = ..., column: _Optional[str] = ..., q: _Optional[float] = ..., alias: _Optional[str] = ..., function_name: _Optional[str] = ...) -> None: ...

class SelectItem(_message.Message):
    __slots__ = ("key_column", "aggregate", "alias")
    KEY_COLUMN_FIELD_NUMBER: _ClassVar[int]
    AGGREGATE_FIELD_NUMBER: _ClassVar[int]
    ALIAS_FIELD_NUMBER: _ClassVar[int]
    key_column: str
    aggregate: Aggregate
    alias: str
    def __init__(self, key_column: _Optional[str] = ..., aggregate: _Optional[_Union[Aggregate, _Mapping]] = ..., alias: _Optional[str] = ...) -> None: ...

class Predicate(_message.Message):
    __slots__ = ("column", "op", "values")
    COLUMN_FIELD_NUMBER: _ClassVar[int]
    OP_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    column: str
    op: str
    values: _containers.RepeatedCompositeFieldContainer[Value]
    def __init__(self, column: _Optional[str] = ..., op: _Optional[str] = ..., values: _Optional[_Iterable[_Union[Value, _Mapping]]] = ...) -> None: ...

class Conjunction(_message.Message):
    __slots__ = ("predicates",)
    PREDICATES_FIELD_NUMBER: _ClassVar[int]
    predicates: _containers.RepeatedCompositeFieldContainer[Predicate]
    def __init__(self, predicates: _Optional[_Iterable[_Union[Predicate, _Mapping]]] = ...) -> None: ...

class OrderBy(_message.Message):
    __slots__ = ("item", "descending", "name", "aggregate")
    ITEM_FIELD_NUMBER: _ClassVar[int]
    DESCENDING_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    AGGREGATE_FIELD_NUMBER: _ClassVar[int]
    item: int
    descending: bool
    name: str
    aggregate: Aggregate
    def __init__(self, item: _Optional[int] = ..., descending: _Optional[bool] = ..., name: _Optional[str] = ..., aggregate: _Optional[_Union[Aggregate, _Mapping]] = ...) -> None: ...

class JoinEqual(_message.Message):
    __slots__ = ("left", "right")
    LEFT_FIELD_NUMBER: _ClassVar[int]
    RIGHT_FIELD_NUMBER: _ClassVar[int]
    left: str
    right: str
    def __init__(self, left: _Optional[str] = ..., right: _Optional[str] = ...) -> None: ...

class JoinBand(_message.Message):
    __slots__ = ("column", "base", "low", "high")
    COLUMN_FIELD_NUMBER: _ClassVar[int]
    BASE_FIELD_NUMBER: _ClassVar[int]
    LOW_FIELD_NUMBER: _ClassVar[int]
    HIGH_FIELD_NUMBER: _ClassVar[int]
    column: str
    base: str
    low: int
    high: int
    def __init__(self, column: _Optional[str] = ..., base: _Optional[str] = ..., low: _Optional[int] = ..., high: _Optional[int] = ...) -> None: ...

class JoinCondition(_message.Message):
    __slots__ = ("equal", "band")
    EQUAL_FIELD_NUMBER: _ClassVar[int]
    BAND_FIELD_NUMBER: _ClassVar[int]
    equal: JoinEqual
    band: JoinBand
    def __init__(self, equal: _Optional[_Union[JoinEqual, _Mapping]] = ..., band: _Optional[_Union[JoinBand, _Mapping]] = ...) -> None: ...

class JoinSource(_message.Message):
    __slots__ = ("stream", "alias", "range", "slide", "on")
    STREAM_FIELD_NUMBER: _ClassVar[int]
    ALIAS_FIELD_NUMBER: _ClassVar[int]
    RANGE_FIELD_NUMBER: _ClassVar[int]
    SLIDE_FIELD_NUMBER: _ClassVar[int]
    ON_FIELD_NUMBER: _ClassVar[int]
    stream: str
    alias: str
    range: WindowLength
    slide: WindowLength
    on: _containers.RepeatedCompositeFieldContainer[JoinCondition]
    def __init__(self, stream: _Optional[str] = ..., alias: _Optional[str] = ..., range: _Optional[_Union[WindowLength, _Mapping]] = ..., slide: _Optional[_Union[WindowLength, _Mapping]] = ..., on: _Optional[_Iterable[_Union[JoinCondition, _Mapping]]] = ...) -> None: ...

class StructuredQuery(_message.Message):
    __slots__ = ("stream", "items", "where", "group_by", "order_by", "limit", "range", "slide", "outer", "approximate", "sources", "within", "as_of_slide", "group_by_columns", "distinct", "having", "select_exprs", "where_expr", "group_by_exprs", "having_expr", "order_by_exprs", "from_query", "window_shape", "landmark", "cumulate")
    STREAM_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    WHERE_FIELD_NUMBER: _ClassVar[int]
    GROUP_BY_FIELD_NUMBER: _ClassVar[int]
    ORDER_BY_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    RANGE_FIELD_NUMBER: _ClassVar[int]
    SLIDE_FIELD_NUMBER: _ClassVar[int]
    OUTER_FIELD_NUMBER: _ClassVar[int]
    APPROXIMATE_FIELD_NUMBER: _ClassVar[int]
    SOURCES_FIELD_NUMBER: _ClassVar[int]
    WITHIN_FIELD_NUMBER: _ClassVar[int]
    AS_OF_SLIDE_FIELD_NUMBER: _ClassVar[int]
    GROUP_BY_COLUMNS_FIELD_NUMBER: _ClassVar[int]
    DISTINCT_FIELD_NUMBER: _ClassVar[int]
    HAVING_FIELD_NUMBER: _ClassVar[int]
    SELECT_EXPRS_FIELD_NUMBER: _ClassVar[int]
    WHERE_EXPR_FIELD_NUMBER: _ClassVar[int]
    GROUP_BY_EXPRS_FIELD_NUMBER: _ClassVar[int]
    HAVING_EXPR_FIELD_NUMBER: _ClassVar[int]
    ORDER_BY_EXPRS_FIELD_NUMBER: _ClassVar[int]
    FROM_QUERY_FIELD_NUMBER: _ClassVar[int]
    WINDOW_SHAPE_FIELD_NUMBER: _ClassVar[int]
    LANDMARK_FIELD_NUMBER: _ClassVar[int]
    CUMULATE_FIELD_NUMBER: _ClassVar[int]
    stream: str
    items: _containers.RepeatedCompositeFieldContainer[SelectItem]
    where: _containers.RepeatedCompositeFieldContainer[Conjunction]
    group_by: str
    order_by: _containers.RepeatedCompositeFieldContainer[OrderBy]
    limit: int
    range: WindowLength
    slide: WindowLength
    outer: _containers.RepeatedCompositeFieldContainer[Aggregate]
    approximate: bool
    sources: _containers.RepeatedCompositeFieldContainer[JoinSource]
    within: WindowLength
    as_of_slide: int
    group_by_columns: _containers.RepeatedScalarFieldContainer[str]
    distinct: bool
    having: HavingCondition
    select_exprs: _containers.RepeatedCompositeFieldContainer[ExprItem]
    where_expr: Expr
    group_by_exprs: _containers.RepeatedCompositeFieldContainer[Expr]
    having_expr: Expr
    order_by_exprs: _containers.RepeatedCompositeFieldContainer[ExprOrder]
    from_query: StructuredQuery
    window_shape: SessionRowsWindow
    landmark: LandmarkWindow
    cumulate: CumulateWindow
    def __init__(self, stream: _Optional[str] = ..., items: _Optional[_Iterable[_Union[SelectItem, _Mapping]]] = ..., where: _Optional[_Iterable[_Union[Conjunction, _Mapping]]] = ..., group_by: _Optional[str] = ..., order_by: _Optional[_Iterable[_Union[OrderBy, _Mapping]]] = ..., limit: _Optional[int] = ..., range: _Optional[_Union[WindowLength, _Mapping]] = ..., slide: _Optional[_Union[WindowLength, _Mapping]] = ..., outer: _Optional[_Iterable[_Union[Aggregate, _Mapping]]] = ..., approximate: _Optional[bool] = ..., sources: _Optional[_Iterable[_Union[JoinSource, _Mapping]]] = ..., within: _Optional[_Union[WindowLength, _Mapping]] = ..., as_of_slide: _Optional[int] = ..., group_by_columns: _Optional[_Iterable[str]] = ..., distinct: _Optional[bool] = ..., having: _Optional[_Union[HavingCondition, _Mapping]] = ..., select_exprs: _Optional[_Iterable[_Union[ExprItem, _Mapping]]] = ..., where_expr: _Optional[_Union[Expr, _Mapping]] = ..., group_by_exprs: _Optional[_Iterable[_Union[Expr, _Mapping]]] = ..., having_expr: _Optional[_Union[Expr, _Mapping]] = ..., order_by_exprs: _Optional[_Iterable[_Union[ExprOrder, _Mapping]]] = ..., from_query: _Optional[_Union[StructuredQuery, _Mapping]] = ..., window_shape: _Optional[_Union[SessionRowsWindow, _Mapping]] = ..., landmark: _Optional[_Union[LandmarkWindow, _Mapping]] = ..., cumulate: _Optional[_Union[CumulateWindow, _Mapping]] = ...) -> None: ...

class LandmarkWindow(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CumulateWindow(_message.Message):
    __slots__ = ("step_ms", "size_ms")
    STEP_MS_FIELD_NUMBER: _ClassVar[int]
    SIZE_MS_FIELD_NUMBER: _ClassVar[int]
    step_ms: int
    size_ms: int
    def __init__(self, step_ms: _Optional[int] = ..., size_ms: _Optional[int] = ...) -> None: ...

class SessionRowsWindow(_message.Message):
    __slots__ = ("session_gap_ms", "rows", "partition_by")
    SESSION_GAP_MS_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    PARTITION_BY_FIELD_NUMBER: _ClassVar[int]
    session_gap_ms: int
    rows: int
    partition_by: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, session_gap_ms: _Optional[int] = ..., rows: _Optional[int] = ..., partition_by: _Optional[_Iterable[str]] = ...) -> None: ...

class Expr(_message.Message):
    __slots__ = ("column", "literal", "interval_ms", "op", "call", "case", "cast", "aggregate", "timestamp_us", "date_days")
    COLUMN_FIELD_NUMBER: _ClassVar[int]
    LITERAL_FIELD_NUMBER: _ClassVar[int]
    INTERVAL_MS_FIELD_NUMBER: _ClassVar[int]
    OP_FIELD_NUMBER: _ClassVar[int]
    CALL_FIELD_NUMBER: _ClassVar[int]
    CASE_FIELD_NUMBER: _ClassVar[int]
    CAST_FIELD_NUMBER: _ClassVar[int]
    AGGREGATE_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_US_FIELD_NUMBER: _ClassVar[int]
    DATE_DAYS_FIELD_NUMBER: _ClassVar[int]
    column: str
    literal: Value
    interval_ms: int
    op: ExprOp
    call: ExprCall
    case: ExprCase
    cast: ExprCast
    aggregate: ExprAggregate
    timestamp_us: int
    date_days: int
    def __init__(self, column: _Optional[str] = ..., literal: _Optional[_Union[Value, _Mapping]] = ..., interval_ms: _Optional[int] = ..., op: _Optional[_Union[ExprOp, _Mapping]] = ..., call: _Optional[_Union[ExprCall, _Mapping]] = ..., case: _Optional[_Union[ExprCase, _Mapping]] = ..., cast: _Optional[_Union[ExprCast, _Mapping]] = ..., aggregate: _Optional[_Union[ExprAggregate, _Mapping]] = ..., timestamp_us: _Optional[int] = ..., date_days: _Optional[int] = ...) -> None: ...

class ExprOp(_message.Message):
    __slots__ = ("op", "args")
    OP_FIELD_NUMBER: _ClassVar[int]
    ARGS_FIELD_NUMBER: _ClassVar[int]
    op: str
    args: _containers.RepeatedCompositeFieldContainer[Expr]
    def __init__(self, op: _Optional[str] = ..., args: _Optional[_Iterable[_Union[Expr, _Mapping]]] = ...) -> None: ...

class ExprCall(_message.Message):
    __slots__ = ("name", "args")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ARGS_FIELD_NUMBER: _ClassVar[int]
    name: str
    args: _containers.RepeatedCompositeFieldContainer[Expr]
    def __init__(self, name: _Optional[str] = ..., args: _Optional[_Iterable[_Union[Expr, _Mapping]]] = ...) -> None: ...

class ExprCase(_message.Message):
    __slots__ = ("operand", "whens", "default")
    OPERAND_FIELD_NUMBER: _ClassVar[int]
    WHENS_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_FIELD_NUMBER: _ClassVar[int]
    operand: Expr
    whens: _containers.RepeatedCompositeFieldContainer[ExprWhen]
    default: Expr
    def __init__(self, operand: _Optional[_Union[Expr, _Mapping]] = ..., whens: _Optional[_Iterable[_Union[ExprWhen, _Mapping]]] = ..., default: _Optional[_Union[Expr, _Mapping]] = ...) -> None: ...

class ExprWhen(_message.Message):
    __slots__ = ("when", "then")
    WHEN_FIELD_NUMBER: _ClassVar[int]
    THEN_FIELD_NUMBER: _ClassVar[int]
    when: Expr
    then: Expr
    def __init__(self, when: _Optional[_Union[Expr, _Mapping]] = ..., then: _Optional[_Union[Expr, _Mapping]] = ...) -> None: ...

class ExprCast(_message.Message):
    __slots__ = ("arg", "type")
    ARG_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    arg: Expr
    type: str
    def __init__(self, arg: _Optional[_Union[Expr, _Mapping]] = ..., type: _Optional[str] = ...) -> None: ...

class ExprAggregate(_message.Message):
    __slots__ = ("function", "args", "distinct", "filter", "q")
    FUNCTION_FIELD_NUMBER: _ClassVar[int]
    ARGS_FIELD_NUMBER: _ClassVar[int]
    DISTINCT_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    Q_FIELD_NUMBER: _ClassVar[int]
    function: str
    args: _containers.RepeatedCompositeFieldContainer[Expr]
    distinct: bool
    filter: Expr
    q: float
    def __init__(self, function: _Optional[str] = ..., args: _Optional[_Iterable[_Union[Expr, _Mapping]]] = ..., distinct: _Optional[bool] = ..., filter: _Optional[_Union[Expr, _Mapping]] = ..., q: _Optional[float] = ...) -> None: ...

class ExprItem(_message.Message):
    __slots__ = ("expr", "alias")
    EXPR_FIELD_NUMBER: _ClassVar[int]
    ALIAS_FIELD_NUMBER: _ClassVar[int]
    expr: Expr
    alias: str
    def __init__(self, expr: _Optional[_Union[Expr, _Mapping]] = ..., alias: _Optional[str] = ...) -> None: ...

class ExprOrder(_message.Message):
    __slots__ = ("expr", "descending", "nulls")
    EXPR_FIELD_NUMBER: _ClassVar[int]
    DESCENDING_FIELD_NUMBER: _ClassVar[int]
    NULLS_FIELD_NUMBER: _ClassVar[int]
    expr: Expr
    descending: bool
    nulls: NullOrder
    def __init__(self, expr: _Optional[_Union[Expr, _Mapping]] = ..., descending: _Optional[bool] = ..., nulls: _Optional[_Union[NullOrder, str]] = ...) -> None: ...

class HavingCondition(_message.Message):
    __slots__ = ("test", "all_of", "any_of", "negate")
    TEST_FIELD_NUMBER: _ClassVar[int]
    ALL_OF_FIELD_NUMBER: _ClassVar[int]
    ANY_OF_FIELD_NUMBER: _ClassVar[int]
    NEGATE_FIELD_NUMBER: _ClassVar[int]
    test: HavingTest
    all_of: HavingConditions
    any_of: HavingConditions
    negate: HavingCondition
    def __init__(self, test: _Optional[_Union[HavingTest, _Mapping]] = ..., all_of: _Optional[_Union[HavingConditions, _Mapping]] = ..., any_of: _Optional[_Union[HavingConditions, _Mapping]] = ..., negate: _Optional[_Union[HavingCondition, _Mapping]] = ...) -> None: ...

class HavingConditions(_message.Message):
    __slots__ = ("parts",)
    PARTS_FIELD_NUMBER: _ClassVar[int]
    parts: _containers.RepeatedCompositeFieldContainer[HavingCondition]
    def __init__(self, parts: _Optional[_Iterable[_Union[HavingCondition, _Mapping]]] = ...) -> None: ...

class HavingTest(_message.Message):
    __slots__ = ("aggregate", "name", "op", "values", "of_total")
    AGGREGATE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    OP_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    OF_TOTAL_FIELD_NUMBER: _ClassVar[int]
    aggregate: Aggregate
    name: str
    op: str
    values: _containers.RepeatedCompositeFieldContainer[Value]
    of_total: bool
    def __init__(self, aggregate: _Optional[_Union[Aggregate, _Mapping]] = ..., name: _Optional[str] = ..., op: _Optional[str] = ..., values: _Optional[_Iterable[_Union[Value, _Mapping]]] = ..., of_total: _Optional[bool] = ...) -> None: ...

class StageRowsRequest(_message.Message):
    __slots__ = ("stream", "writer_id", "batch_id", "attempt", "arrow_ipc", "columnar", "chunk")
    STREAM_FIELD_NUMBER: _ClassVar[int]
    WRITER_ID_FIELD_NUMBER: _ClassVar[int]
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    ARROW_IPC_FIELD_NUMBER: _ClassVar[int]
    COLUMNAR_FIELD_NUMBER: _ClassVar[int]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    stream: str
    writer_id: str
    batch_id: int
    attempt: str
    arrow_ipc: bytes
    columnar: ColumnarBatch
    chunk: int
    def __init__(self, stream: _Optional[str] = ..., writer_id: _Optional[str] = ..., batch_id: _Optional[int] = ..., attempt: _Optional[str] = ..., arrow_ipc: _Optional[bytes] = ..., columnar: _Optional[_Union[ColumnarBatch, _Mapping]] = ..., chunk: _Optional[int] = ...) -> None: ...

class StageRowsResponse(_message.Message):
    __slots__ = ("staged_rows", "committed")
    STAGED_ROWS_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_FIELD_NUMBER: _ClassVar[int]
    staged_rows: int
    committed: bool
    def __init__(self, staged_rows: _Optional[int] = ..., committed: _Optional[bool] = ...) -> None: ...

class AttemptRows(_message.Message):
    __slots__ = ("attempt", "rows")
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    attempt: str
    rows: int
    def __init__(self, attempt: _Optional[str] = ..., rows: _Optional[int] = ...) -> None: ...

class CommitBatchRequest(_message.Message):
    __slots__ = ("stream", "writer_id", "batch_id", "attempts", "slide", "event_time_ms", "at_slide", "split")
    STREAM_FIELD_NUMBER: _ClassVar[int]
    WRITER_ID_FIELD_NUMBER: _ClassVar[int]
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    SLIDE_FIELD_NUMBER: _ClassVar[int]
    EVENT_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    AT_SLIDE_FIELD_NUMBER: _ClassVar[int]
    SPLIT_FIELD_NUMBER: _ClassVar[int]
    stream: str
    writer_id: str
    batch_id: int
    attempts: _containers.RepeatedCompositeFieldContainer[AttemptRows]
    slide: bool
    event_time_ms: int
    at_slide: int
    split: bool
    def __init__(self, stream: _Optional[str] = ..., writer_id: _Optional[str] = ..., batch_id: _Optional[int] = ..., attempts: _Optional[_Iterable[_Union[AttemptRows, _Mapping]]] = ..., slide: _Optional[bool] = ..., event_time_ms: _Optional[int] = ..., at_slide: _Optional[int] = ..., split: _Optional[bool] = ...) -> None: ...

class CommitBatchResponse(_message.Message):
    __slots__ = ("accepted_rows", "late_rows", "duplicate", "latest_slide", "pending", "visible_from_slide")
    ACCEPTED_ROWS_FIELD_NUMBER: _ClassVar[int]
    LATE_ROWS_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    LATEST_SLIDE_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    VISIBLE_FROM_SLIDE_FIELD_NUMBER: _ClassVar[int]
    accepted_rows: int
    late_rows: int
    duplicate: bool
    latest_slide: int
    pending: bool
    visible_from_slide: int
    def __init__(self, accepted_rows: _Optional[int] = ..., late_rows: _Optional[int] = ..., duplicate: _Optional[bool] = ..., latest_slide: _Optional[int] = ..., pending: _Optional[bool] = ..., visible_from_slide: _Optional[int] = ...) -> None: ...

class AbortBatchRequest(_message.Message):
    __slots__ = ("stream", "writer_id", "batch_id")
    STREAM_FIELD_NUMBER: _ClassVar[int]
    WRITER_ID_FIELD_NUMBER: _ClassVar[int]
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    stream: str
    writer_id: str
    batch_id: int
    def __init__(self, stream: _Optional[str] = ..., writer_id: _Optional[str] = ..., batch_id: _Optional[int] = ...) -> None: ...

class AbortBatchResponse(_message.Message):
    __slots__ = ("discarded_rows",)
    DISCARDED_ROWS_FIELD_NUMBER: _ClassVar[int]
    discarded_rows: int
    def __init__(self, discarded_rows: _Optional[int] = ...) -> None: ...

class QueryRequest(_message.Message):
    __slots__ = ("text", "structured", "priority", "read_from", "min_slide", "min_slide_wait_ms", "return_sketches")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    STRUCTURED_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    READ_FROM_FIELD_NUMBER: _ClassVar[int]
    MIN_SLIDE_FIELD_NUMBER: _ClassVar[int]
    MIN_SLIDE_WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    RETURN_SKETCHES_FIELD_NUMBER: _ClassVar[int]
    text: str
    structured: StructuredQuery
    priority: int
    read_from: str
    min_slide: int
    min_slide_wait_ms: int
    return_sketches: bool
    def __init__(self, text: _Optional[str] = ..., structured: _Optional[_Union[StructuredQuery, _Mapping]] = ..., priority: _Optional[int] = ..., read_from: _Optional[str] = ..., min_slide: _Optional[int] = ..., min_slide_wait_ms: _Optional[int] = ..., return_sketches: _Optional[bool] = ...) -> None: ...

class Answer(_message.Message):
    __slots__ = ("columns", "rows", "slide", "window_start_ms", "window_end_ms", "staleness_ms", "response_ms", "restarts", "policy", "access", "exact", "guaranteed", "query_id", "execution", "late_slides", "inter_exec_ms", "answered_ms", "stream", "column_types", "sources", "column_precisions", "column_scales", "early_slides", "group", "fallback", "cached", "bounds", "sketches")
    COLUMNS_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    SLIDE_FIELD_NUMBER: _ClassVar[int]
    WINDOW_START_MS_FIELD_NUMBER: _ClassVar[int]
    WINDOW_END_MS_FIELD_NUMBER: _ClassVar[int]
    STALENESS_MS_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_MS_FIELD_NUMBER: _ClassVar[int]
    RESTARTS_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    ACCESS_FIELD_NUMBER: _ClassVar[int]
    EXACT_FIELD_NUMBER: _ClassVar[int]
    GUARANTEED_FIELD_NUMBER: _ClassVar[int]
    QUERY_ID_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_FIELD_NUMBER: _ClassVar[int]
    LATE_SLIDES_FIELD_NUMBER: _ClassVar[int]
    INTER_EXEC_MS_FIELD_NUMBER: _ClassVar[int]
    ANSWERED_MS_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    COLUMN_TYPES_FIELD_NUMBER: _ClassVar[int]
    SOURCES_FIELD_NUMBER: _ClassVar[int]
    COLUMN_PRECISIONS_FIELD_NUMBER: _ClassVar[int]
    COLUMN_SCALES_FIELD_NUMBER: _ClassVar[int]
    EARLY_SLIDES_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    FALLBACK_FIELD_NUMBER: _ClassVar[int]
    CACHED_FIELD_NUMBER: _ClassVar[int]
    BOUNDS_FIELD_NUMBER: _ClassVar[int]
    SKETCHES_FIELD_NUMBER: _ClassVar[int]
    columns: _containers.RepeatedScalarFieldContainer[str]
    rows: _containers.RepeatedCompositeFieldContainer[Row]
    slide: int
    window_start_ms: int
    window_end_ms: int
    staleness_ms: float
    response_ms: float
    restarts: int
    policy: str
    access: AccessPath
    exact: bool
    guaranteed: bool
    query_id: str
    execution: int
    late_slides: int
    inter_exec_ms: float
    answered_ms: float
    stream: str
    column_types: _containers.RepeatedScalarFieldContainer[ColumnType]
    sources: _containers.RepeatedCompositeFieldContainer[StreamWindow]
    column_precisions: _containers.RepeatedScalarFieldContainer[int]
    column_scales: _containers.RepeatedScalarFieldContainer[int]
    early_slides: int
    group: str
    fallback: bool
    cached: bool
    bounds: _containers.RepeatedCompositeFieldContainer[ErrorBound]
    sketches: _containers.RepeatedCompositeFieldContainer[MergedSketch]
    def __init__(self, columns: _Optional[_Iterable[str]] = ..., rows: _Optional[_Iterable[_Union[Row, _Mapping]]] = ..., slide: _Optional[int] = ..., window_start_ms: _Optional[int] = ..., window_end_ms: _Optional[int] = ..., staleness_ms: _Optional[float] = ..., response_ms: _Optional[float] = ..., restarts: _Optional[int] = ..., policy: _Optional[str] = ..., access: _Optional[_Union[AccessPath, str]] = ..., exact: _Optional[bool] = ..., guaranteed: _Optional[bool] = ..., query_id: _Optional[str] = ..., execution: _Optional[int] = ..., late_slides: _Optional[int] = ..., inter_exec_ms: _Optional[float] = ..., answered_ms: _Optional[float] = ..., stream: _Optional[str] = ..., column_types: _Optional[_Iterable[_Union[ColumnType, str]]] = ..., sources: _Optional[_Iterable[_Union[StreamWindow, _Mapping]]] = ..., column_precisions: _Optional[_Iterable[int]] = ..., column_scales: _Optional[_Iterable[int]] = ..., early_slides: _Optional[int] = ..., group: _Optional[str] = ..., fallback: _Optional[bool] = ..., cached: _Optional[bool] = ..., bounds: _Optional[_Iterable[_Union[ErrorBound, _Mapping]]] = ..., sketches: _Optional[_Iterable[_Union[MergedSketch, _Mapping]]] = ...) -> None: ...

class MergedSketch(_message.Message):
    __slots__ = ("column", "kind", "size", "data", "dropped_error")
    COLUMN_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    DROPPED_ERROR_FIELD_NUMBER: _ClassVar[int]
    column: int
    kind: str
    size: int
    data: bytes
    dropped_error: float
    def __init__(self, column: _Optional[int] = ..., kind: _Optional[str] = ..., size: _Optional[int] = ..., data: _Optional[bytes] = ..., dropped_error: _Optional[float] = ...) -> None: ...

class ErrorBound(_message.Message):
    __slots__ = ("row", "column", "sketch", "confidence", "rank_error", "estimate", "lower", "upper", "delta")
    ROW_FIELD_NUMBER: _ClassVar[int]
    COLUMN_FIELD_NUMBER: _ClassVar[int]
    SKETCH_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    RANK_ERROR_FIELD_NUMBER: _ClassVar[int]
    ESTIMATE_FIELD_NUMBER: _ClassVar[int]
    LOWER_FIELD_NUMBER: _ClassVar[int]
    UPPER_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    row: int
    column: int
    sketch: str
    confidence: float
    rank_error: float
    estimate: float
    lower: float
    upper: float
    delta: float
    def __init__(self, row: _Optional[int] = ..., column: _Optional[int] = ..., sketch: _Optional[str] = ..., confidence: _Optional[float] = ..., rank_error: _Optional[float] = ..., estimate: _Optional[float] = ..., lower: _Optional[float] = ..., upper: _Optional[float] = ..., delta: _Optional[float] = ...) -> None: ...

class QueryResponse(_message.Message):
    __slots__ = ("answer",)
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    answer: Answer
    def __init__(self, answer: _Optional[_Union[Answer, _Mapping]] = ...) -> None: ...

class ExplainResponse(_message.Message):
    __slots__ = ("access", "how", "streams", "subwindows", "reads", "group_by", "aggregates", "every_slides", "sharing")
    ACCESS_FIELD_NUMBER: _ClassVar[int]
    HOW_FIELD_NUMBER: _ClassVar[int]
    STREAMS_FIELD_NUMBER: _ClassVar[int]
    SUBWINDOWS_FIELD_NUMBER: _ClassVar[int]
    READS_FIELD_NUMBER: _ClassVar[int]
    GROUP_BY_FIELD_NUMBER: _ClassVar[int]
    AGGREGATES_FIELD_NUMBER: _ClassVar[int]
    EVERY_SLIDES_FIELD_NUMBER: _ClassVar[int]
    SHARING_FIELD_NUMBER: _ClassVar[int]
    access: AccessPath
    how: str
    streams: _containers.RepeatedScalarFieldContainer[str]
    subwindows: int
    reads: int
    group_by: _containers.RepeatedScalarFieldContainer[str]
    aggregates: _containers.RepeatedCompositeFieldContainer[AggregateSource]
    every_slides: int
    sharing: str
    def __init__(self, access: _Optional[_Union[AccessPath, str]] = ..., how: _Optional[str] = ..., streams: _Optional[_Iterable[str]] = ..., subwindows: _Optional[int] = ..., reads: _Optional[int] = ..., group_by: _Optional[_Iterable[str]] = ..., aggregates: _Optional[_Iterable[_Union[AggregateSource, _Mapping]]] = ..., every_slides: _Optional[int] = ..., sharing: _Optional[str] = ...) -> None: ...

class AggregateSource(_message.Message):
    __slots__ = ("label", "function", "source")
    LABEL_FIELD_NUMBER: _ClassVar[int]
    FUNCTION_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    label: str
    function: str
    source: str
    def __init__(self, label: _Optional[str] = ..., function: _Optional[str] = ..., source: _Optional[str] = ...) -> None: ...

class StreamWindow(_message.Message):
    __slots__ = ("stream", "slide", "window_start_ms", "window_end_ms")
    STREAM_FIELD_NUMBER: _ClassVar[int]
    SLIDE_FIELD_NUMBER: _ClassVar[int]
    WINDOW_START_MS_FIELD_NUMBER: _ClassVar[int]
    WINDOW_END_MS_FIELD_NUMBER: _ClassVar[int]
    stream: str
    slide: int
    window_start_ms: int
    window_end_ms: int
    def __init__(self, stream: _Optional[str] = ..., slide: _Optional[int] = ..., window_start_ms: _Optional[int] = ..., window_end_ms: _Optional[int] = ...) -> None: ...

class RegisterQueryRequest(_message.Message):
    __slots__ = ("text", "structured", "priority", "return_sketches", "request_key")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    STRUCTURED_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    RETURN_SKETCHES_FIELD_NUMBER: _ClassVar[int]
    REQUEST_KEY_FIELD_NUMBER: _ClassVar[int]
    text: str
    structured: StructuredQuery
    priority: int
    return_sketches: bool
    request_key: str
    def __init__(self, text: _Optional[str] = ..., structured: _Optional[_Union[StructuredQuery, _Mapping]] = ..., priority: _Optional[int] = ..., return_sketches: _Optional[bool] = ..., request_key: _Optional[str] = ...) -> None: ...

class RegisterQueryResponse(_message.Message):
    __slots__ = ("query_id", "every_slides")
    QUERY_ID_FIELD_NUMBER: _ClassVar[int]
    EVERY_SLIDES_FIELD_NUMBER: _ClassVar[int]
    query_id: str
    every_slides: int
    def __init__(self, query_id: _Optional[str] = ..., every_slides: _Optional[int] = ...) -> None: ...

class UnregisterQueryRequest(_message.Message):
    __slots__ = ("query_id",)
    QUERY_ID_FIELD_NUMBER: _ClassVar[int]
    query_id: str
    def __init__(self, query_id: _Optional[str] = ...) -> None: ...

class UnregisterQueryResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListQueriesRequest(_message.Message):
    __slots__ = ("stream",)
    STREAM_FIELD_NUMBER: _ClassVar[int]
    stream: str
    def __init__(self, stream: _Optional[str] = ...) -> None: ...

class PeriodicQueryInfo(_message.Message):
    __slots__ = ("query_id", "stream", "text", "every_slides", "executions", "late", "last_slide", "subscribers", "streams")
    QUERY_ID_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    EVERY_SLIDES_FIELD_NUMBER: _ClassVar[int]
    EXECUTIONS_FIELD_NUMBER: _ClassVar[int]
    LATE_FIELD_NUMBER: _ClassVar[int]
    LAST_SLIDE_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIBERS_FIELD_NUMBER: _ClassVar[int]
    STREAMS_FIELD_NUMBER: _ClassVar[int]
    query_id: str
    stream: str
    text: str
    every_slides: int
    executions: int
    late: int
    last_slide: int
    subscribers: int
    streams: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, query_id: _Optional[str] = ..., stream: _Optional[str] = ..., text: _Optional[str] = ..., every_slides: _Optional[int] = ..., executions: _Optional[int] = ..., late: _Optional[int] = ..., last_slide: _Optional[int] = ..., subscribers: _Optional[int] = ..., streams: _Optional[_Iterable[str]] = ...) -> None: ...

class ListQueriesResponse(_message.Message):
    __slots__ = ("queries",)
    QUERIES_FIELD_NUMBER: _ClassVar[int]
    queries: _containers.RepeatedCompositeFieldContainer[PeriodicQueryInfo]
    def __init__(self, queries: _Optional[_Iterable[_Union[PeriodicQueryInfo, _Mapping]]] = ...) -> None: ...

class SubscribeRequest(_message.Message):
    __slots__ = ("query_id", "after_slide")
    QUERY_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_SLIDE_FIELD_NUMBER: _ClassVar[int]
    query_id: str
    after_slide: int
    def __init__(self, query_id: _Optional[str] = ..., after_slide: _Optional[int] = ...) -> None: ...

class ReadAnswersRequest(_message.Message):
    __slots__ = ("query_id", "after_slide", "through_slide", "limit")
    QUERY_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_SLIDE_FIELD_NUMBER: _ClassVar[int]
    THROUGH_SLIDE_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    query_id: str
    after_slide: int
    through_slide: int
    limit: int
    def __init__(self, query_id: _Optional[str] = ..., after_slide: _Optional[int] = ..., through_slide: _Optional[int] = ..., limit: _Optional[int] = ...) -> None: ...

class ReadAnswersResponse(_message.Message):
    __slots__ = ("answers", "latest_slide", "first_slide")
    ANSWERS_FIELD_NUMBER: _ClassVar[int]
    LATEST_SLIDE_FIELD_NUMBER: _ClassVar[int]
    FIRST_SLIDE_FIELD_NUMBER: _ClassVar[int]
    answers: _containers.RepeatedCompositeFieldContainer[Answer]
    latest_slide: int
    first_slide: int
    def __init__(self, answers: _Optional[_Iterable[_Union[Answer, _Mapping]]] = ..., latest_slide: _Optional[int] = ..., first_slide: _Optional[int] = ...) -> None: ...

class Percentiles(_message.Message):
    __slots__ = ("count", "p50", "p90", "p99", "max")
    COUNT_FIELD_NUMBER: _ClassVar[int]
    P50_FIELD_NUMBER: _ClassVar[int]
    P90_FIELD_NUMBER: _ClassVar[int]
    P99_FIELD_NUMBER: _ClassVar[int]
    MAX_FIELD_NUMBER: _ClassVar[int]
    count: int
    p50: float
    p90: float
    p99: float
    max: float
    def __init__(self, count: _Optional[int] = ..., p50: _Optional[float] = ..., p90: _Optional[float] = ..., p99: _Optional[float] = ..., max: _Optional[float] = ...) -> None: ...

class StreamStats(_message.Message):
    __slots__ = ("stream", "slides", "queries", "aborts", "restarts", "failed", "late_rows", "duplicate_batches", "accepted_rows", "staleness_ms", "response_ms", "slide_delay_ms", "errors", "catch_up_slides", "staged_rows", "discarded_rows", "seal_ms", "stopped", "seconds_like_batches", "fallbacks", "split_batches", "pending_commits")
    STREAM_FIELD_NUMBER: _ClassVar[int]
    SLIDES_FIELD_NUMBER: _ClassVar[int]
    QUERIES_FIELD_NUMBER: _ClassVar[int]
    ABORTS_FIELD_NUMBER: _ClassVar[int]
    RESTARTS_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    LATE_ROWS_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_BATCHES_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_ROWS_FIELD_NUMBER: _ClassVar[int]
    STALENESS_MS_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_MS_FIELD_NUMBER: _ClassVar[int]
    SLIDE_DELAY_MS_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    CATCH_UP_SLIDES_FIELD_NUMBER: _ClassVar[int]
    STAGED_ROWS_FIELD_NUMBER: _ClassVar[int]
    DISCARDED_ROWS_FIELD_NUMBER: _ClassVar[int]
    SEAL_MS_FIELD_NUMBER: _ClassVar[int]
    STOPPED_FIELD_NUMBER: _ClassVar[int]
    SECONDS_LIKE_BATCHES_FIELD_NUMBER: _ClassVar[int]
    FALLBACKS_FIELD_NUMBER: _ClassVar[int]
    SPLIT_BATCHES_FIELD_NUMBER: _ClassVar[int]
    PENDING_COMMITS_FIELD_NUMBER: _ClassVar[int]
    stream: str
    slides: int
    queries: int
    aborts: int
    restarts: int
    failed: int
    late_rows: int
    duplicate_batches: int
    accepted_rows: int
    staleness_ms: Percentiles
    response_ms: Percentiles
    slide_delay_ms: Percentiles
    errors: int
    catch_up_slides: int
    staged_rows: int
    discarded_rows: int
    seal_ms: Percentiles
    stopped: str
    seconds_like_batches: int
    fallbacks: int
    split_batches: int
    pending_commits: int
    def __init__(self, stream: _Optional[str] = ..., slides: _Optional[int] = ..., queries: _Optional[int] = ..., aborts: _Optional[int] = ..., restarts: _Optional[int] = ..., failed: _Optional[int] = ..., late_rows: _Optional[int] = ..., duplicate_batches: _Optional[int] = ..., accepted_rows: _Optional[int] = ..., staleness_ms: _Optional[_Union[Percentiles, _Mapping]] = ..., response_ms: _Optional[_Union[Percentiles, _Mapping]] = ..., slide_delay_ms: _Optional[_Union[Percentiles, _Mapping]] = ..., errors: _Optional[int] = ..., catch_up_slides: _Optional[int] = ..., staged_rows: _Optional[int] = ..., discarded_rows: _Optional[int] = ..., seal_ms: _Optional[_Union[Percentiles, _Mapping]] = ..., stopped: _Optional[str] = ..., seconds_like_batches: _Optional[int] = ..., fallbacks: _Optional[int] = ..., split_batches: _Optional[int] = ..., pending_commits: _Optional[int] = ...) -> None: ...

class ClassStats(_message.Message):
    __slots__ = ("committed", "aborts", "restarts", "failed", "removals", "errors", "fallbacks")
    COMMITTED_FIELD_NUMBER: _ClassVar[int]
    ABORTS_FIELD_NUMBER: _ClassVar[int]
    RESTARTS_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    REMOVALS_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    FALLBACKS_FIELD_NUMBER: _ClassVar[int]
    committed: int
    aborts: int
    restarts: int
    failed: int
    removals: int
    errors: int
    fallbacks: int
    def __init__(self, committed: _Optional[int] = ..., aborts: _Optional[int] = ..., restarts: _Optional[int] = ..., failed: _Optional[int] = ..., removals: _Optional[int] = ..., errors: _Optional[int] = ..., fallbacks: _Optional[int] = ...) -> None: ...

class GetStatsRequest(_message.Message):
    __slots__ = ("stream",)
    STREAM_FIELD_NUMBER: _ClassVar[int]
    stream: str
    def __init__(self, stream: _Optional[str] = ...) -> None: ...

class DurabilityStats(_message.Message):
    __slots__ = ("enabled", "fsync", "last_lsn", "log_bytes", "snapshots", "last_snapshot_pause_ms", "max_snapshot_pause_ms", "write_failure", "snapshot_error", "recovery_s", "recovered_records", "snapshot_lsn")
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    FSYNC_FIELD_NUMBER: _ClassVar[int]
    LAST_LSN_FIELD_NUMBER: _ClassVar[int]
    LOG_BYTES_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOTS_FIELD_NUMBER: _ClassVar[int]
    LAST_SNAPSHOT_PAUSE_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_SNAPSHOT_PAUSE_MS_FIELD_NUMBER: _ClassVar[int]
    WRITE_FAILURE_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_ERROR_FIELD_NUMBER: _ClassVar[int]
    RECOVERY_S_FIELD_NUMBER: _ClassVar[int]
    RECOVERED_RECORDS_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_LSN_FIELD_NUMBER: _ClassVar[int]
    enabled: bool
    fsync: str
    last_lsn: int
    log_bytes: int
    snapshots: int
    last_snapshot_pause_ms: float
    max_snapshot_pause_ms: float
    write_failure: str
    snapshot_error: str
    recovery_s: float
    recovered_records: int
    snapshot_lsn: int
    def __init__(self, enabled: _Optional[bool] = ..., fsync: _Optional[str] = ..., last_lsn: _Optional[int] = ..., log_bytes: _Optional[int] = ..., snapshots: _Optional[int] = ..., last_snapshot_pause_ms: _Optional[float] = ..., max_snapshot_pause_ms: _Optional[float] = ..., write_failure: _Optional[str] = ..., snapshot_error: _Optional[str] = ..., recovery_s: _Optional[float] = ..., recovered_records: _Optional[int] = ..., snapshot_lsn: _Optional[int] = ...) -> None: ...

class GetStatsResponse(_message.Message):
    __slots__ = ("policy", "streams", "onetime", "periodic", "durability", "sharing", "answer_cache")
    POLICY_FIELD_NUMBER: _ClassVar[int]
    STREAMS_FIELD_NUMBER: _ClassVar[int]
    ONETIME_FIELD_NUMBER: _ClassVar[int]
    PERIODIC_FIELD_NUMBER: _ClassVar[int]
    DURABILITY_FIELD_NUMBER: _ClassVar[int]
    SHARING_FIELD_NUMBER: _ClassVar[int]
    ANSWER_CACHE_FIELD_NUMBER: _ClassVar[int]
    policy: str
    streams: _containers.RepeatedCompositeFieldContainer[StreamStats]
    onetime: ClassStats
    periodic: ClassStats
    durability: DurabilityStats
    sharing: SharingStats
    answer_cache: AnswerCacheStats
    def __init__(self, policy: _Optional[str] = ..., streams: _Optional[_Iterable[_Union[StreamStats, _Mapping]]] = ..., onetime: _Optional[_Union[ClassStats, _Mapping]] = ..., periodic: _Optional[_Union[ClassStats, _Mapping]] = ..., durability: _Optional[_Union[DurabilityStats, _Mapping]] = ..., sharing: _Optional[_Union[SharingStats, _Mapping]] = ..., answer_cache: _Optional[_Union[AnswerCacheStats, _Mapping]] = ...) -> None: ...

class AnswerCacheStats(_message.Message):
    __slots__ = ("hits", "misses", "entries", "bytes", "evictions", "max_entries", "max_bytes", "requests")
    HITS_FIELD_NUMBER: _ClassVar[int]
    MISSES_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    EVICTIONS_FIELD_NUMBER: _ClassVar[int]
    MAX_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    hits: int
    misses: int
    entries: int
    bytes: int
    evictions: int
    max_entries: int
    max_bytes: int
    requests: int
    def __init__(self, hits: _Optional[int] = ..., misses: _Optional[int] = ..., entries: _Optional[int] = ..., bytes: _Optional[int] = ..., evictions: _Optional[int] = ..., max_entries: _Optional[int] = ..., max_bytes: _Optional[int] = ..., requests: _Optional[int] = ...) -> None: ...

class SharingStats(_message.Message):
    __slots__ = ("mode", "groups", "members_per_group", "executions", "answers", "executions_saved", "early_runs", "late_runs", "aborts", "failures", "tasks", "cover_executions_saved", "cover_reads_saved", "join_groups", "join_answers", "contributions_reused", "slice_groups", "slice_executions", "slice_answers", "fallen_back", "fallbacks", "choices_pending")
    MODE_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_PER_GROUP_FIELD_NUMBER: _ClassVar[int]
    EXECUTIONS_FIELD_NUMBER: _ClassVar[int]
    ANSWERS_FIELD_NUMBER: _ClassVar[int]
    EXECUTIONS_SAVED_FIELD_NUMBER: _ClassVar[int]
    EARLY_RUNS_FIELD_NUMBER: _ClassVar[int]
    LATE_RUNS_FIELD_NUMBER: _ClassVar[int]
    ABORTS_FIELD_NUMBER: _ClassVar[int]
    FAILURES_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    COVER_EXECUTIONS_SAVED_FIELD_NUMBER: _ClassVar[int]
    COVER_READS_SAVED_FIELD_NUMBER: _ClassVar[int]
    JOIN_GROUPS_FIELD_NUMBER: _ClassVar[int]
    JOIN_ANSWERS_FIELD_NUMBER: _ClassVar[int]
    CONTRIBUTIONS_REUSED_FIELD_NUMBER: _ClassVar[int]
    SLICE_GROUPS_FIELD_NUMBER: _ClassVar[int]
    SLICE_EXECUTIONS_FIELD_NUMBER: _ClassVar[int]
    SLICE_ANSWERS_FIELD_NUMBER: _ClassVar[int]
    FALLEN_BACK_FIELD_NUMBER: _ClassVar[int]
    FALLBACKS_FIELD_NUMBER: _ClassVar[int]
    CHOICES_PENDING_FIELD_NUMBER: _ClassVar[int]
    mode: str
    groups: int
    members_per_group: _containers.RepeatedScalarFieldContainer[int]
    executions: int
    answers: int
    executions_saved: int
    early_runs: int
    late_runs: int
    aborts: int
    failures: int
    tasks: int
    cover_executions_saved: int
    cover_reads_saved: int
    join_groups: int
    join_answers: int
    contributions_reused: int
    slice_groups: int
    slice_executions: int
    slice_answers: int
    fallen_back: int
    fallbacks: int
    choices_pending: int
    def __init__(self, mode: _Optional[str] = ..., groups: _Optional[int] = ..., members_per_group: _Optional[_Iterable[int]] = ..., executions: _Optional[int] = ..., answers: _Optional[int] = ..., executions_saved: _Optional[int] = ..., early_runs: _Optional[int] = ..., late_runs: _Optional[int] = ..., aborts: _Optional[int] = ..., failures: _Optional[int] = ..., tasks: _Optional[int] = ..., cover_executions_saved: _Optional[int] = ..., cover_reads_saved: _Optional[int] = ..., join_groups: _Optional[int] = ..., join_answers: _Optional[int] = ..., contributions_reused: _Optional[int] = ..., slice_groups: _Optional[int] = ..., slice_executions: _Optional[int] = ..., slice_answers: _Optional[int] = ..., fallen_back: _Optional[int] = ..., fallbacks: _Optional[int] = ..., choices_pending: _Optional[int] = ...) -> None: ...

class HistoryEvent(_message.Message):
    __slots__ = ("seq", "stream", "op", "txn", "subwindow", "version", "window_len", "t", "streams", "as_of")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    OP_FIELD_NUMBER: _ClassVar[int]
    TXN_FIELD_NUMBER: _ClassVar[int]
    SUBWINDOW_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    WINDOW_LEN_FIELD_NUMBER: _ClassVar[int]
    T_FIELD_NUMBER: _ClassVar[int]
    STREAMS_FIELD_NUMBER: _ClassVar[int]
    AS_OF_FIELD_NUMBER: _ClassVar[int]
    seq: int
    stream: str
    op: str
    txn: str
    subwindow: int
    version: int
    window_len: int
    t: float
    streams: _containers.RepeatedScalarFieldContainer[str]
    as_of: int
    def __init__(self, seq: _Optional[int] = ..., stream: _Optional[str] = ..., op: _Optional[str] = ..., txn: _Optional[str] = ..., subwindow: _Optional[int] = ..., version: _Optional[int] = ..., window_len: _Optional[int] = ..., t: _Optional[float] = ..., streams: _Optional[_Iterable[str]] = ..., as_of: _Optional[int] = ...) -> None: ...

class StreamHistoryRequest(_message.Message):
    __slots__ = ("stream", "since_seq", "limit")
    STREAM_FIELD_NUMBER: _ClassVar[int]
    SINCE_SEQ_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    stream: str
    since_seq: int
    limit: int
    def __init__(self, stream: _Optional[str] = ..., since_seq: _Optional[int] = ..., limit: _Optional[int] = ...) -> None: ...

class StreamHistoryResponse(_message.Message):
    __slots__ = ("events", "next_seq")
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_SEQ_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[HistoryEvent]
    next_seq: int
    def __init__(self, events: _Optional[_Iterable[_Union[HistoryEvent, _Mapping]]] = ..., next_seq: _Optional[int] = ...) -> None: ...

class ReplicaFetchRequest(_message.Message):
    __slots__ = ("stream", "node", "epoch", "end_offset", "last_epoch")
    STREAM_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAST_EPOCH_FIELD_NUMBER: _ClassVar[int]
    stream: str
    node: int
    epoch: int
    end_offset: int
    last_epoch: int
    def __init__(self, stream: _Optional[str] = ..., node: _Optional[int] = ..., epoch: _Optional[int] = ..., end_offset: _Optional[int] = ..., last_epoch: _Optional[int] = ...) -> None: ...

class ReplicaRecords(_message.Message):
    __slots__ = ("epoch", "truncate_to", "first_offset", "records", "high_watermark")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    TRUNCATE_TO_FIELD_NUMBER: _ClassVar[int]
    FIRST_OFFSET_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    truncate_to: int
    first_offset: int
    records: _containers.RepeatedScalarFieldContainer[bytes]
    high_watermark: int
    def __init__(self, epoch: _Optional[int] = ..., truncate_to: _Optional[int] = ..., first_offset: _Optional[int] = ..., records: _Optional[_Iterable[bytes]] = ..., high_watermark: _Optional[int] = ...) -> None: ...

class ReplicaAckRequest(_message.Message):
    __slots__ = ("stream", "node", "epoch", "offset")
    STREAM_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    stream: str
    node: int
    epoch: int
    offset: int
    def __init__(self, stream: _Optional[str] = ..., node: _Optional[int] = ..., epoch: _Optional[int] = ..., offset: _Optional[int] = ...) -> None: ...

class ReplicaAckResponse(_message.Message):
    __slots__ = ("high_watermark",)
    HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    high_watermark: int
    def __init__(self, high_watermark: _Optional[int] = ...) -> None: ...

class SetReplicaRoleRequest(_message.Message):
    __slots__ = ("stream", "role", "epoch", "leader", "replicas", "acks")
    STREAM_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    ACKS_FIELD_NUMBER: _ClassVar[int]
    stream: str
    role: ReplicaRole
    epoch: int
    leader: int
    replicas: _containers.RepeatedScalarFieldContainer[int]
    acks: str
    def __init__(self, stream: _Optional[str] = ..., role: _Optional[_Union[ReplicaRole, str]] = ..., epoch: _Optional[int] = ..., leader: _Optional[int] = ..., replicas: _Optional[_Iterable[int]] = ..., acks: _Optional[str] = ...) -> None: ...

class GetReplicaStatusRequest(_message.Message):
    __slots__ = ("stream",)
    STREAM_FIELD_NUMBER: _ClassVar[int]
    stream: str
    def __init__(self, stream: _Optional[str] = ...) -> None: ...

class FollowerStatus(_message.Message):
    __slots__ = ("node", "acked_offset", "lag_records", "in_sync")
    NODE_FIELD_NUMBER: _ClassVar[int]
    ACKED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAG_RECORDS_FIELD_NUMBER: _ClassVar[int]
    IN_SYNC_FIELD_NUMBER: _ClassVar[int]
    node: int
    acked_offset: int
    lag_records: int
    in_sync: bool
    def __init__(self, node: _Optional[int] = ..., acked_offset: _Optional[int] = ..., lag_records: _Optional[int] = ..., in_sync: _Optional[bool] = ...) -> None: ...

class ReplicaStatus(_message.Message):
    __slots__ = ("stream", "role", "epoch", "leader", "replicas", "acks", "end_offset", "high_watermark", "applied_offset", "applied_slide", "in_sync", "followers", "lag_records", "durable_offset")
    STREAM_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    ACKS_FIELD_NUMBER: _ClassVar[int]
    END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    APPLIED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    APPLIED_SLIDE_FIELD_NUMBER: _ClassVar[int]
    IN_SYNC_FIELD_NUMBER: _ClassVar[int]
    FOLLOWERS_FIELD_NUMBER: _ClassVar[int]
    LAG_RECORDS_FIELD_NUMBER: _ClassVar[int]
    DURABLE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    stream: str
    role: ReplicaRole
    epoch: int
    leader: int
    replicas: _containers.RepeatedScalarFieldContainer[int]
    acks: str
    end_offset: int
    high_watermark: int
    applied_offset: int
    applied_slide: int
    in_sync: _containers.RepeatedScalarFieldContainer[int]
    followers: _containers.RepeatedCompositeFieldContainer[FollowerStatus]
    lag_records: int
    durable_offset: int
    def __init__(self, stream: _Optional[str] = ..., role: _Optional[_Union[ReplicaRole, str]] = ..., epoch: _Optional[int] = ..., leader: _Optional[int] = ..., replicas: _Optional[_Iterable[int]] = ..., acks: _Optional[str] = ..., end_offset: _Optional[int] = ..., high_watermark: _Optional[int] = ..., applied_offset: _Optional[int] = ..., applied_slide: _Optional[int] = ..., in_sync: _Optional[_Iterable[int]] = ..., followers: _Optional[_Iterable[_Union[FollowerStatus, _Mapping]]] = ..., lag_records: _Optional[int] = ..., durable_offset: _Optional[int] = ...) -> None: ...
